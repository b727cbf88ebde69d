//! What a simulated page holds: its contents named by a 64-bit key, written out as 4 KiB of real bytes whenever the scanner hashes or compares a page, and the content mix a tenant declares.
//!
//! The sim keeps one key per guest page instead of 4 KiB, so a 10-VM host costs megabytes, not
//! gigabytes. A key stands for exactly one page of bytes ([`write_page`]): key 0 is the page of
//! zeros, any other key a page whose every 8-byte word is drawn from it. Two
//! pages are identical exactly when their keys are equal, but the page-sharing scanner never
//! compares keys: it hashes the bytes and compares them in full, as ESX does, so its cost and
//! its behaviour on a hash collision are those of the real mechanism.
//!
//! A tenant's pages (ESX §4.2's sources of sharing) are, by its [`ContentMix`]:
//! - **zero** pages;
//! - **common** pages, identical across every tenant declaring the same `image` (the same
//!   guest OS, binaries, libraries or data set): page `i` of one such tenant equals page `i`
//!   of another;
//! - **duplicate** pages, identical within the tenant only, `duplicate_copies` to a content;
//! - **unique** pages, the rest.
//!
//! Which class a page falls in is drawn from the image and the page's index (in runs of
//! `duplicate_copies` pages), so tenants of one image agree page by page. A write makes the page unique (copy-on-write breaks sharing).

use memtide_model::PAGE_SIZE;

/// Bytes in a page.
pub const PAGE_BYTES: usize = PAGE_SIZE as usize;

/// The contents of one page, by name: equal keys, equal bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Content(pub u64);

impl Content {
    /// The page of zeros.
    pub const ZERO: Content = Content(0);

    /// Page `index` of namespace `space`: never the zero page.
    pub fn of(space: u64, index: u64) -> Content {
        Content(mix(mix(space) ^ index) | 1)
    }

    pub fn is_zero(self) -> bool {
        self == Content::ZERO
    }
}

/// SplitMix64's finaliser: a fast, well-mixed 64-bit permutation.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A name as a namespace (FNV-1a), so scenario files name images by string.
pub fn space(name: &str) -> u64 {
    name.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    })
}

/// Writes the page `content` names into `out`.
pub fn write_page(content: Content, out: &mut [u8; PAGE_BYTES]) {
    if content.is_zero() {
        out.fill(0);
        return;
    }
    // Word i is (key ^ i) times an odd constant: a bijection of the key for every i, so
    // different keys differ in every word, and cheap enough to write a page at memory speed.
    let key = content.0;
    for (i, word) in out.chunks_exact_mut(8).enumerate() {
        let w = (key ^ i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        word.copy_from_slice(&w.to_le_bytes());
    }
}

/// The 64-bit hash of a page's bytes (XXH3, the "fast, high-quality hash" ESX's design calls
/// for).
pub fn hash_page(bytes: &[u8; PAGE_BYTES]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Namespace salts, so that a tenant's own pages, its writes and its files never meet.
const DUPLICATE: u64 = 0x6475_706c;
const UNIQUE: u64 = 0x756e_6971;
const WRITTEN: u64 = 0x7772_6974;
const FILE: u64 = 0x6669_6c65;
const KERNEL: u64 = 0x6b65_726e;

/// What a tenant's pages hold (see the module docs). Fractions of its pages; the rest are
/// unique.
#[derive(Clone, Debug, PartialEq)]
pub struct ContentMix {
    /// The image the common pages come from (a name: tenants naming the same one share them).
    pub image: String,
    pub zero: f64,
    pub common: f64,
    pub duplicate: f64,
    /// Pages holding each duplicated content (at least 2).
    pub duplicate_copies: u32,
    /// The workload's file blocks are the image's (a data set every tenant of the image reads)
    /// rather than the tenant's own.
    pub common_files: bool,
}

impl Default for ContentMix {
    /// Every page unique: nothing to share.
    fn default() -> Self {
        ContentMix {
            image: String::new(),
            zero: 0.0,
            common: 0.0,
            duplicate: 0.0,
            duplicate_copies: 2,
            common_files: false,
        }
    }
}

/// A tenant's contents as the sim writes them: its mix, its own namespace and a count of its
/// writes (each write names a new unique page).
#[derive(Clone, Debug)]
pub struct TenantContents {
    image: u64,
    own: u64,
    /// Class cuts on a 2^32 scale: zero below `zero`, common below `common`, duplicate
    /// below `duplicate`.
    zero: u64,
    common: u64,
    duplicate: u64,
    copies: u64,
    common_files: bool,
    writes: u64,
}

impl TenantContents {
    /// The contents of tenant `tenant` (its id) with `mix`.
    pub fn new(tenant: u32, declared: &ContentMix) -> TenantContents {
        let cut = |f: f64| (f.clamp(0.0, 1.0) * (1u64 << 32) as f64) as u64;
        let zero = cut(declared.zero);
        let common = cut(declared.zero + declared.common);
        let duplicate = cut(declared.zero + declared.common + declared.duplicate);
        TenantContents {
            image: space(&declared.image),
            own: mix(0x7465_6e61_6e74 ^ u64::from(tenant)),
            zero,
            common,
            duplicate,
            copies: u64::from(declared.duplicate_copies.max(2)),
            common_files: declared.common_files,
            writes: 0,
        }
    }

    /// Pages come in runs of `copies` that fall in one class together, so that a duplicated
    /// content has its copies.
    fn class(&self, salt: u64, index: u64) -> Content {
        let run = index / self.copies;
        let u = mix(self.image ^ salt ^ mix(run)) >> 32;
        if u < self.zero {
            Content::ZERO
        } else if u < self.common {
            Content::of(self.image ^ salt, index)
        } else if u < self.duplicate {
            Content::of(self.own ^ salt ^ DUPLICATE, run)
        } else {
            Content::of(self.own ^ salt ^ UNIQUE, index)
        }
    }

    /// The workload's anonymous page `page` as first written.
    pub fn anon(&self, page: u32) -> Content {
        self.class(0, u64::from(page))
    }

    /// Guest kernel page `ppn`, as booted.
    pub fn kernel(&self, ppn: u32) -> Content {
        self.class(KERNEL, u64::from(ppn))
    }

    /// File block `block`, as read from disk.
    pub fn file(&self, block: u32) -> Content {
        let space = if self.common_files {
            self.image
        } else {
            self.own
        };
        Content::of(space ^ FILE, u64::from(block))
    }

    /// A page just written: contents no other page has.
    pub fn written(&mut self) -> Content {
        self.writes += 1;
        Content::of(self.own ^ WRITTEN, self.writes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(c: Content) -> Box<[u8; PAGE_BYTES]> {
        let mut b = Box::new([0u8; PAGE_BYTES]);
        write_page(c, &mut b);
        b
    }

    #[test]
    fn equal_keys_write_equal_bytes_and_different_keys_different_ones() {
        let a = Content::of(1, 7);
        assert_eq!(page(a), page(a));
        assert_ne!(page(a), page(Content::of(1, 8)));
        assert_ne!(page(a), page(Content::of(2, 7)));
        assert!(page(Content::ZERO).iter().all(|&b| b == 0));
        assert!(!Content::of(0, 0).is_zero());
        assert_eq!(hash_page(&page(a)), hash_page(&page(a)));
        assert_ne!(hash_page(&page(a)), hash_page(&page(Content::ZERO)));
    }

    #[test]
    fn tenants_of_one_image_agree_on_common_pages_and_nothing_else() {
        let mix = ContentMix {
            image: "linux".into(),
            zero: 0.1,
            common: 0.5,
            duplicate: 0.1,
            duplicate_copies: 4,
            common_files: true,
        };
        let a = TenantContents::new(1, &mix);
        let b = TenantContents::new(2, &mix);
        let n = 20_000u32;
        let (mut zero, mut same, mut dup_a) = (0, 0, std::collections::BTreeMap::new());
        for p in 0..n {
            let (x, y) = (a.anon(p), b.anon(p));
            if x.is_zero() {
                zero += 1;
                assert!(y.is_zero());
            } else if x == y {
                same += 1;
            }
            *dup_a.entry(x).or_insert(0u32) += 1;
        }
        let frac = |k: u32| f64::from(k) / f64::from(n);
        assert!((0.09..0.11).contains(&frac(zero)), "{zero}");
        assert!((0.48..0.52).contains(&frac(same)), "{same}");
        // Duplicates: contents seen more than once within the tenant, other than zero.
        let dup = dup_a
            .iter()
            .filter(|(c, &k)| !c.is_zero() && k > 1)
            .map(|(_, &k)| k)
            .sum::<u32>();
        assert!((0.08..0.12).contains(&frac(dup)), "{dup}");
        assert_eq!(a.file(3), b.file(3));
        let private = TenantContents::new(
            3,
            &ContentMix {
                common_files: false,
                ..mix.clone()
            },
        );
        assert_ne!(private.file(3), a.file(3));
    }

    #[test]
    fn every_write_names_new_contents() {
        let mut a = TenantContents::new(1, &ContentMix::default());
        let (x, y) = (a.written(), a.written());
        assert_ne!(x, y);
        assert_ne!(x, TenantContents::new(2, &ContentMix::default()).written());
        assert_ne!(
            a.anon(0),
            TenantContents::new(2, &ContentMix::default()).anon(0)
        );
    }
}
