//! The toucher's memory: one anonymous private mapping, filled page by page with the content asked for (page-distinct and incompressible by default, zeros, or seeded to repeat across processes), then touched one word per page.

use crate::args::Content;
use std::sync::atomic::{AtomicBool, Ordering};

/// Pages between two looks at the stop flag.
const PAGES_PER_CHECK: usize = 1024;

/// How a long walk over pages ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    Done,
    Stopped,
}

/// An anonymous private mapping of `capacity_pages` pages; the first `filled_pages` hold the
/// pattern (written, so resident and dirty), the rest were never written or were released.
pub struct Region {
    base: *mut u8,
    page_bytes: usize,
    capacity_pages: usize,
    filled_pages: usize,
    content: Content,
}

/// The system page size in bytes.
pub fn page_bytes() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}

/// Whole pages needed for `bytes`.
pub fn pages_for(bytes: u64, page_bytes: usize) -> usize {
    let page = page_bytes as u64;
    usize::try_from(bytes.div_ceil(page)).unwrap_or(usize::MAX)
}

impl Region {
    /// Maps `capacity_pages` pages (nothing when zero), to be filled with `content`.
    pub fn map(
        capacity_pages: usize,
        page_bytes: usize,
        content: Content,
    ) -> std::io::Result<Region> {
        let mut region = Region {
            base: std::ptr::null_mut(),
            page_bytes,
            capacity_pages: 0,
            filled_pages: 0,
            content,
        };
        if capacity_pages == 0 {
            return Ok(region);
        }
        let len_bytes = capacity_pages
            .checked_mul(page_bytes)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        // SAFETY: a fresh anonymous private mapping at an address the kernel picks; it aliases
        // nothing, and `Drop` unmaps exactly this range.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        region.base = base.cast();
        region.capacity_pages = capacity_pages;
        Ok(region)
    }

    /// Makes exactly the first `pages` pages hold the pattern: writes the missing ones (checking
    /// `stop` every 1024 pages), or gives pages beyond `pages` back to the kernel.
    pub fn resize(&mut self, pages: usize, stop: &AtomicBool) -> Walk {
        let pages = pages.min(self.capacity_pages);
        if pages < self.filled_pages {
            self.release_from(pages);
            return Walk::Done;
        }
        while self.filled_pages < pages {
            if stop.load(Ordering::Relaxed) {
                return Walk::Stopped;
            }
            let end = (self.filled_pages + PAGES_PER_CHECK).min(pages);
            let content = self.content;
            for index in self.filled_pages..end {
                let words = self.page_words(index);
                match content {
                    Content::Unique => fill_page(words, index as u64),
                    // Written, not left to the kernel's shared zero page: resident like data.
                    Content::Zero => words.iter_mut().for_each(|w| {
                        // SAFETY: `w` is a valid, aligned word of our mapping; volatile so
                        // that the store of a zero is not elided on a fresh page.
                        unsafe { std::ptr::write_volatile(w, 0) }
                    }),
                    Content::Seeded(seed) => fill_seeded(words, seed, index as u64),
                }
            }
            self.filled_pages = end;
        }
        Walk::Done
    }

    /// One pass over the active set: writes one word in each of the first `active_pages` pages
    /// (reads it, for zero or seeded content, so pages merged with others stay merged), in
    /// order, checking `stop` every 1024 pages.
    pub fn touch(&mut self, active_pages: usize, pass: u64, stop: &AtomicBool) -> Walk {
        let active_pages = active_pages.min(self.filled_pages);
        let words_per_page = self.page_bytes / 8;
        if self.content != Content::Unique {
            return self.read_pass(active_pages, stop);
        }
        for chunk_start in (0..active_pages).step_by(PAGES_PER_CHECK) {
            if stop.load(Ordering::Relaxed) {
                return Walk::Stopped;
            }
            for index in chunk_start..(chunk_start + PAGES_PER_CHECK).min(active_pages) {
                // Word 1: word 0 keeps the page index. Never zero, different each pass.
                let value = (pass << 1 | 1) ^ (index as u64).rotate_left(32);
                // SAFETY: `index < filled_pages <= capacity_pages`, the word lies inside the
                // mapping and is 8-byte aligned (pages are); volatile so the store happens.
                unsafe {
                    let word = self.base.cast::<u64>().add(index * words_per_page + 1);
                    std::ptr::write_volatile(word, value);
                }
            }
        }
        Walk::Done
    }

    /// Reads word 1 of each of the first `active_pages` pages.
    fn read_pass(&self, active_pages: usize, stop: &AtomicBool) -> Walk {
        let words_per_page = self.page_bytes / 8;
        let mut sum = 0u64;
        for chunk_start in (0..active_pages).step_by(PAGES_PER_CHECK) {
            if stop.load(Ordering::Relaxed) {
                return Walk::Stopped;
            }
            for index in chunk_start..(chunk_start + PAGES_PER_CHECK).min(active_pages) {
                // SAFETY: as in `touch`: inside the mapping, aligned; volatile so the load
                // happens.
                sum = sum.wrapping_add(unsafe {
                    std::ptr::read_volatile(self.base.cast::<u64>().add(index * words_per_page + 1))
                });
            }
        }
        std::hint::black_box(sum);
        Walk::Done
    }

    fn release_from(&mut self, pages: usize) {
        let start = pages * self.page_bytes;
        let len_bytes = (self.filled_pages - pages) * self.page_bytes;
        // SAFETY: the range lies inside our private anonymous mapping; MADV_DONTNEED drops its
        // contents and later reads see zero pages, which `resize` refills before use.
        unsafe {
            libc::madvise(self.base.add(start).cast(), len_bytes, libc::MADV_DONTNEED);
        }
        self.filled_pages = pages;
    }

    fn page_words(&mut self, index: usize) -> &mut [u64] {
        assert!(index < self.capacity_pages);
        let words = self.page_bytes / 8;
        // SAFETY: page `index` lies inside the mapping, is 8-byte aligned, and the returned
        // borrow of `self` keeps any other reference to it from existing meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.base.cast::<u64>().add(index * words), words) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.capacity_pages > 0 {
            // SAFETY: exactly the range `map` created; nothing borrows it once we are dropped.
            unsafe {
                libc::munmap(self.base.cast(), self.capacity_pages * self.page_bytes);
            }
        }
    }
}

/// Fills one page: word 0 is the page index, every other word comes from xorshift64 seeded by
/// the page index, so no page is zero, same-filled or equal to another, and a compressor finds
/// nothing to squeeze (like encrypted or already-compressed data).
pub fn fill_page(words: &mut [u64], page_index: u64) {
    let mut state = seed(page_index);
    if let Some((first, rest)) = words.split_first_mut() {
        *first = page_index;
        for word in rest {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *word = state;
        }
    }
}

/// Fills one page with the seeded pattern: the same bytes for the same `(seed, page_index)` in
/// any process, different for different pages; never zero, incompressible like `fill_page`.
pub fn fill_seeded(words: &mut [u64], seed: u64, page_index: u64) {
    let key = page_index ^ self::seed(seed ^ 0xA076_1D64_78BD_642F);
    fill_page(words, key);
}

/// splitmix64 of the index: neighbouring indexes give unrelated, non-zero xorshift seeds.
fn seed(page_index: u64) -> u64 {
    let mut z = page_index.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    if z == 0 {
        0x2545_F491_4F6C_DD1D
    } else {
        z
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORDS: usize = 512;

    fn page(index: u64) -> Vec<u64> {
        let mut words = vec![0; WORDS];
        fill_page(&mut words, index);
        words
    }

    #[test]
    fn pattern_differs_per_page_and_starts_with_the_index() {
        let pages: Vec<Vec<u64>> = (0..64).map(page).collect();
        for (i, p) in pages.iter().enumerate() {
            assert_eq!(p[0], i as u64);
            for q in &pages[i + 1..] {
                assert_ne!(p[1..], q[1..], "page {i} repeats another");
            }
        }
    }

    #[test]
    fn pattern_is_neither_zero_nor_same_filled() {
        for index in [0, 1, 2, 1 << 20, u64::MAX] {
            let p = page(index);
            assert!(
                p[1..].iter().all(|&w| w != 0),
                "page {index} has a zero word"
            );
            assert!(
                p[2..].iter().any(|&w| w != p[1]),
                "page {index} is same-filled"
            );
            let bytes: Vec<u8> = p.iter().flat_map(|w| w.to_le_bytes()).collect();
            let mut seen = [false; 256];
            bytes.iter().for_each(|&b| seen[b as usize] = true);
            assert!(
                seen.iter().filter(|&&s| s).count() > 200,
                "page {index} has few byte values"
            );
        }
    }

    #[test]
    fn pattern_is_the_same_for_the_same_page() {
        assert_eq!(page(7), page(7));
    }

    #[test]
    fn resize_fills_releases_and_refills_and_touch_stays_inside() {
        let page_bytes = page_bytes();
        let stop = AtomicBool::new(false);
        let mut region = Region::map(8, page_bytes, Content::Unique).unwrap();
        assert_eq!(region.resize(6, &stop), Walk::Done);
        assert_eq!(region.filled_pages, 6);
        assert_eq!(region.page_words(5)[0], 5);
        assert_eq!(region.touch(100, 3, &stop), Walk::Done);
        assert_eq!(region.page_words(5)[1], 7 ^ 5u64.rotate_left(32));
        assert_eq!(region.resize(2, &stop), Walk::Done);
        assert_eq!(region.filled_pages, 2);
        assert_eq!(region.resize(100, &stop), Walk::Done);
        assert_eq!(region.filled_pages, 8);
        assert_eq!(region.page_words(7)[0], 7);
    }

    #[test]
    fn a_raised_stop_flag_ends_the_walks() {
        let stop = AtomicBool::new(true);
        let mut region = Region::map(4, page_bytes(), Content::Unique).unwrap();
        assert_eq!(region.resize(4, &stop), Walk::Stopped);
        assert_eq!(region.filled_pages, 0);
        assert_eq!(
            region.touch(4, 0, &stop),
            Walk::Done,
            "nothing filled, nothing to touch"
        );
    }

    #[test]
    fn seeded_pages_repeat_across_regions_with_the_seed_and_differ_within_one() {
        let page_bytes = page_bytes();
        let stop = AtomicBool::new(false);
        let words = page_bytes / 8;
        let fill = |content| {
            let mut r = Region::map(4, page_bytes, content).unwrap();
            r.resize(4, &stop);
            assert_eq!(r.touch(4, 1, &stop), Walk::Done);
            (0..4).map(|i| r.page_words(i).to_vec()).collect::<Vec<_>>()
        };
        let (a, b, c) = (
            fill(Content::Seeded(7)),
            fill(Content::Seeded(7)),
            fill(Content::Seeded(8)),
        );
        assert_eq!(a, b, "same seed: same pages, even after a pass");
        assert_ne!(a[0], c[0], "another seed: other pages");
        assert_ne!(a[0], a[1], "pages within one toucher differ");
        assert_ne!(
            a[0],
            fill(Content::Unique)[0],
            "unique is not seed 0's content"
        );
        let zeros = fill(Content::Zero);
        assert!(zeros
            .iter()
            .all(|p| p.len() == words && p.iter().all(|&w| w == 0)));
    }

    #[test]
    fn content_names_parse_and_a_bad_one_is_named() {
        assert_eq!(Content::parse("zero"), Ok(Content::Zero));
        assert_eq!(Content::parse("seeded:42"), Ok(Content::Seeded(42)));
        assert_eq!(Content::parse("unique"), Ok(Content::Unique));
        let err = Content::parse("seeded:x").unwrap_err();
        assert!(err.contains("seeded:x"), "{err}");
    }

    #[test]
    fn page_counts_round_up() {
        assert_eq!(pages_for(0, 4096), 0);
        assert_eq!(pages_for(1, 4096), 1);
        assert_eq!(pages_for(4096, 4096), 1);
        assert_eq!(pages_for(4097, 4096), 2);
        assert_eq!(pages_for(8 << 20, 4096), 2048);
    }
}
