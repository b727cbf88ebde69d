//! The simulated machine: 4 KiB machine frames (MPNs) with a free list, memory reserved as VM overhead, and host swap slots.
//!
//! Free machine memory is `frames - overheads - frames in use`. A frame can only be handed
//! out while that figure is positive, so overhead reservations are never overdrawn. Frame
//! and slot numbers are handed out lazily, so a large machine costs nothing until used.

use memtide_model::Pages;

/// Largest number of frames or swap slots the sim addresses (2^29 pages = 2 TiB): MPNs and
/// slots are packed into 29 bits of a pmap entry.
pub const MAX_FRAMES: u64 = 1 << 29;

/// A pool of numbered pages (frames or swap slots) handed out lazily: numbers never used
/// come from a counter, returned ones from a stack, so a large machine costs nothing up front.
#[derive(Clone, Debug)]
struct Pool {
    size: u32,
    next: u32,
    returned: Vec<u32>,
}

impl Pool {
    fn new(size: u32) -> Pool {
        Pool {
            size,
            next: 0,
            returned: Vec::new(),
        }
    }

    fn available(&self) -> u32 {
        self.size - self.next + self.returned.len() as u32
    }

    fn in_use(&self) -> u32 {
        self.size - self.available()
    }

    #[inline]
    fn take(&mut self) -> Option<u32> {
        if let Some(n) = self.returned.pop() {
            return Some(n);
        }
        if self.next < self.size {
            self.next += 1;
            return Some(self.next - 1);
        }
        None
    }

    #[inline]
    fn give(&mut self, n: u32) {
        debug_assert!(n < self.next);
        self.returned.push(n);
    }
}

/// Machine frames and host swap slots.
#[derive(Clone, Debug)]
pub struct Machine {
    frames: Pool,
    /// Pages reserved as VM overhead (not backed by particular MPNs).
    reserved: u32,
    swap: Pool,
}

impl Machine {
    /// A machine with `machine` pages of RAM and `host_swap` pages of host swap, each
    /// capped at [`MAX_FRAMES`].
    pub fn new(machine: Pages, host_swap: Pages) -> Machine {
        Machine {
            frames: Pool::new(machine.0.min(MAX_FRAMES) as u32),
            reserved: 0,
            swap: Pool::new(host_swap.0.min(MAX_FRAMES) as u32),
        }
    }

    /// Machine memory in all.
    pub fn total(&self) -> Pages {
        Pages(u64::from(self.frames.size))
    }

    /// Memory neither reserved as overhead nor in use by any VM.
    pub fn free(&self) -> Pages {
        Pages(u64::from(self.free_frames()))
    }

    fn free_frames(&self) -> u32 {
        self.frames.available().saturating_sub(self.reserved)
    }

    /// Frames currently backing some VM page.
    pub fn in_use(&self) -> Pages {
        Pages(u64::from(self.frames.in_use()))
    }

    /// Memory reserved as VM overhead.
    pub fn reserved(&self) -> Pages {
        Pages(u64::from(self.reserved))
    }

    /// Reserves `pages` of overhead; on failure returns the free memory there was.
    pub fn reserve(&mut self, pages: Pages) -> Result<(), Pages> {
        let free = self.free_frames();
        if pages.0 > u64::from(free) {
            return Err(Pages(u64::from(free)));
        }
        self.reserved += pages.0 as u32;
        Ok(())
    }

    /// Gives back an overhead reservation.
    pub fn release(&mut self, pages: Pages) {
        self.reserved = self
            .reserved
            .saturating_sub(pages.0.min(u64::from(u32::MAX)) as u32);
    }

    /// A free frame, if free memory is left.
    #[inline]
    pub fn alloc_frame(&mut self) -> Option<u32> {
        if self.free_frames() == 0 {
            return None;
        }
        self.frames.take()
    }

    /// Returns a frame to the free list.
    #[inline]
    pub fn free_frame(&mut self, mpn: u32) {
        self.frames.give(mpn);
    }

    /// Size of host swap.
    pub fn swap_total(&self) -> Pages {
        Pages(u64::from(self.swap.size))
    }

    /// Host swap slots in use.
    pub fn swap_used(&self) -> Pages {
        Pages(u64::from(self.swap.in_use()))
    }

    /// True when at least one host swap slot is free.
    pub fn swap_available(&self) -> bool {
        self.swap.available() > 0
    }

    /// A free host swap slot.
    pub fn alloc_slot(&mut self) -> Option<u32> {
        self.swap.take()
    }

    /// Returns a host swap slot.
    pub fn free_slot(&mut self, slot: u32) {
        self.swap.give(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_reservation_reduces_free_memory_and_can_fail() {
        let mut m = Machine::new(Pages(100), Pages(0));
        assert_eq!(m.reserve(Pages(30)), Ok(()));
        assert_eq!(m.free(), Pages(70));
        assert_eq!(m.reserve(Pages(71)), Err(Pages(70)));
        m.release(Pages(30));
        assert_eq!(m.free(), Pages(100));
    }

    #[test]
    fn frames_cannot_be_allocated_into_the_overhead_reservation() {
        let mut m = Machine::new(Pages(10), Pages(0));
        m.reserve(Pages(8)).unwrap();
        assert!(m.alloc_frame().is_some());
        assert!(m.alloc_frame().is_some());
        assert_eq!(m.alloc_frame(), None);
        assert_eq!(m.free(), Pages(0));
        assert_eq!(m.in_use(), Pages(2));
    }

    #[test]
    fn freed_frames_are_reused() {
        let mut m = Machine::new(Pages(1), Pages(0));
        let f = m.alloc_frame().unwrap();
        assert_eq!(m.alloc_frame(), None);
        m.free_frame(f);
        assert_eq!(m.alloc_frame(), Some(f));
    }

    #[test]
    fn frame_numbers_are_distinct_while_in_use() {
        let mut m = Machine::new(Pages(5), Pages(0));
        let mut got: Vec<u32> = (0..5).map(|_| m.alloc_frame().unwrap()).collect();
        m.free_frame(got[2]);
        got[2] = m.alloc_frame().unwrap();
        got.sort_unstable();
        got.dedup();
        assert_eq!(got.len(), 5);
        assert!(got.iter().all(|&f| f < 5));
    }

    #[test]
    fn host_swap_slots_run_out_and_come_back() {
        let mut m = Machine::new(Pages(1), Pages(2));
        let a = m.alloc_slot().unwrap();
        let _b = m.alloc_slot().unwrap();
        assert!(!m.swap_available());
        assert_eq!(m.swap_used(), Pages(2));
        m.free_slot(a);
        assert_eq!(m.swap_used(), Pages(1));
        assert_eq!(m.alloc_slot(), Some(a));
    }
}
