//! The simulated machine: 4 KiB machine frames, memory reserved as VM overhead, and host swap slots, each counted.
//!
//! Free machine memory is `frames - overheads - frames in use`. A frame can only be handed
//! out while that figure is positive, so overhead reservations are never overdrawn. Frames
//! and slots are interchangeable (page contents, where pages are shared, live with the guest
//! pages in `crate::sharing`), so they are counted, not numbered: a machine of any size costs
//! a few words.

use memtide_model::Pages;

/// Largest number of frames, swap slots or guest pages the sim addresses (2^29 - 1 pages,
/// just under 2 TiB): guest page numbers are packed into 29 bits of the guest's owner
/// entries, where the highest value ends a page stack.
pub const MAX_FRAMES: u64 = (1 << 29) - 1;

/// A pool of interchangeable pages (frames or swap slots): only how many are in use matters,
/// so a large machine costs nothing.
#[derive(Clone, Debug)]
struct Pool {
    size: u32,
    in_use: u32,
}

impl Pool {
    fn new(size: u32) -> Pool {
        Pool { size, in_use: 0 }
    }

    fn available(&self) -> u32 {
        self.size - self.in_use
    }

    #[inline]
    fn take(&mut self) -> bool {
        if self.in_use < self.size {
            self.in_use += 1;
            return true;
        }
        false
    }

    #[inline]
    fn give(&mut self, n: u32) {
        debug_assert!(self.in_use >= n);
        self.in_use -= n;
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
        Pages(u64::from(self.frames.in_use))
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

    /// Takes a frame; false when no free memory is left.
    #[inline]
    pub fn alloc_frame(&mut self) -> bool {
        self.free_frames() > 0 && self.frames.take()
    }

    /// Returns a frame.
    #[inline]
    pub fn free_frame(&mut self) {
        self.frames.give(1);
    }

    /// Returns the frames and slots of a VM that is gone.
    pub fn give_back(&mut self, frames: u32, slots: u32) {
        self.frames.give(frames);
        self.swap.give(slots);
    }

    /// Size of host swap.
    pub fn swap_total(&self) -> Pages {
        Pages(u64::from(self.swap.size))
    }

    /// Host swap slots in use.
    pub fn swap_used(&self) -> Pages {
        Pages(u64::from(self.swap.in_use))
    }

    /// True when at least one host swap slot is free.
    pub fn swap_available(&self) -> bool {
        self.swap.available() > 0
    }

    /// Takes a host swap slot; false when host swap is full.
    pub fn alloc_slot(&mut self) -> bool {
        self.swap.take()
    }

    /// Returns a host swap slot.
    pub fn free_slot(&mut self) {
        self.swap.give(1);
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
        assert!(m.alloc_frame());
        assert!(m.alloc_frame());
        assert!(!m.alloc_frame());
        assert_eq!(m.free(), Pages(0));
        assert_eq!(m.in_use(), Pages(2));
    }

    #[test]
    fn freed_frames_can_be_taken_again() {
        let mut m = Machine::new(Pages(1), Pages(0));
        assert!(m.alloc_frame());
        assert!(!m.alloc_frame());
        m.free_frame();
        assert_eq!(m.free(), Pages(1));
        assert!(m.alloc_frame());
    }

    #[test]
    fn host_swap_slots_run_out_and_come_back() {
        let mut m = Machine::new(Pages(1), Pages(2));
        assert!(m.alloc_slot());
        assert!(m.alloc_slot());
        assert!(!m.swap_available());
        assert!(!m.alloc_slot());
        assert_eq!(m.swap_used(), Pages(2));
        m.free_slot();
        assert_eq!(m.swap_used(), Pages(1));
        assert!(m.alloc_slot());
    }
}
