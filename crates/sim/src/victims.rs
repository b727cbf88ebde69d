//! Which VM gives up a page when the machine is full, kept as an index that changes by one VM at a time, instead of a pass over every VM per fault.
//!
//! [`HostMemory`](crate::paging::HostMemory) asks for the VM most above its target (ties:
//! lowest index), else for the VM holding the most frames of its own (ties: lowest index).
//! Both are the first maximum of a key per VM, 0 meaning "not a candidate", held in a
//! tournament tree: a change of one VM's key is `log2(VMs)` comparisons, the answer is the
//! root. The host marks each VM whose pmap or target it changes; the marked VMs' keys are
//! read again just before the next question, so a tick that pages nothing costs a mark per
//! change and nothing more. With 2,000 VMs on a full machine the pass it replaces was 89% of
//! a run (docs/benchmarks.md, "The simulator at scale").

use crate::pmap::Pmap;

/// The first index of the largest key over `len` leaves; a key of 0 is no candidate.
#[derive(Clone, Debug, Default)]
struct MaxTree {
    /// Leaves: a power of two, at least `len`.
    size: usize,
    /// `nodes[1]` is the root, `nodes[size + i]` leaf `i`: (key, index of the leaf that wins).
    nodes: Vec<(u64, u32)>,
}

impl MaxTree {
    /// `len` leaves, every key 0.
    fn new(len: usize) -> MaxTree {
        let size = len.max(1).next_power_of_two();
        let mut nodes = vec![(0, 0); 2 * size];
        for (i, node) in nodes[size..].iter_mut().enumerate() {
            node.1 = i as u32;
        }
        let mut tree = MaxTree { size, nodes };
        for node in (1..size).rev() {
            tree.pull(node);
        }
        tree
    }

    /// Node `node` takes the better of its children: the larger key, the left (lower
    /// indices) on a tie.
    fn pull(&mut self, node: usize) {
        let (left, right) = (self.nodes[2 * node], self.nodes[2 * node + 1]);
        self.nodes[node] = if right.0 > left.0 { right } else { left };
    }

    fn set(&mut self, i: usize, key: u64) {
        let mut node = self.size + i;
        if self.nodes[node].0 == key {
            return;
        }
        self.nodes[node].0 = key;
        while node > 1 {
            node /= 2;
            self.pull(node);
        }
    }

    /// The first leaf holding the largest key, if that key is above 0.
    fn first_max(&self) -> Option<usize> {
        let (key, i) = self.nodes[1];
        (key > 0).then_some(i as usize)
    }
}

/// The two questions' trees and the VMs whose keys are stale.
#[derive(Clone, Debug, Default)]
pub struct Victims {
    /// Pages mapped beyond the VM's target, for a VM that holds a frame of its own.
    excess: MaxTree,
    /// Frames of the VM's own (mapped and not shared).
    own: MaxTree,
    /// VMs whose keys may have changed since they were last read.
    stale: Vec<u32>,
    marked: Vec<bool>,
}

impl Victims {
    /// An index of `len` VMs, every key to be read.
    pub fn new(len: usize) -> Victims {
        let mut v = Victims {
            excess: MaxTree::new(len),
            own: MaxTree::new(len),
            stale: Vec::new(),
            marked: vec![false; len],
        };
        v.mark_all();
        v
    }

    /// VM `vm`'s pmap or target changed.
    #[inline]
    pub fn mark(&mut self, vm: usize) {
        if let Some(m) = self.marked.get_mut(vm) {
            if !*m {
                *m = true;
                self.stale.push(vm as u32);
            }
        }
    }

    /// Any VM may have changed (page sharing moves other VMs' pages).
    pub fn mark_all(&mut self) {
        for vm in 0..self.marked.len() {
            self.mark(vm);
        }
    }

    /// Reads the stale VMs' keys again.
    fn refresh(&mut self, pmaps: &[Pmap], targets: &[Option<u64>]) {
        for vm in self.stale.drain(..) {
            let i = vm as usize;
            self.marked[i] = false;
            let pmap = &pmaps[i];
            let own = u64::from(pmap.mapped() - pmap.shared());
            let excess = match targets[i] {
                Some(target) if own > 0 => u64::from(pmap.mapped()).saturating_sub(target),
                _ => 0,
            };
            self.excess.set(i, excess);
            self.own.set(i, own);
        }
    }

    /// The VM most above its target, holding a frame of its own (ties: lowest index).
    pub fn most_above_target(&mut self, pmaps: &[Pmap], targets: &[Option<u64>]) -> Option<usize> {
        self.refresh(pmaps, targets);
        self.excess.first_max()
    }

    /// The VM holding the most frames of its own (ties: lowest index).
    pub fn most_own(&mut self, pmaps: &[Pmap], targets: &[Option<u64>]) -> Option<usize> {
        self.refresh(pmaps, targets);
        self.own.first_max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmap::PageState;
    use crate::rng::SimRng;

    /// The pass over every VM the index replaces.
    fn by_pass(pmaps: &[Pmap], targets: &[Option<u64>]) -> (Option<usize>, Option<usize>) {
        let own = |p: &Pmap| u64::from(p.mapped() - p.shared());
        let mut above: Option<(usize, u64)> = None;
        let mut most: Option<(usize, u64)> = None;
        for (i, (p, t)) in pmaps.iter().zip(targets).enumerate() {
            let excess = t.map_or(0, |t| u64::from(p.mapped()).saturating_sub(t));
            if excess > 0 && own(p) > 0 && above.is_none_or(|(_, e)| excess > e) {
                above = Some((i, excess));
            }
            if own(p) > 0 && most.is_none_or(|(_, m)| own(p) > m) {
                most = Some((i, own(p)));
            }
        }
        (above.map(|a| a.0), most.map(|m| m.0))
    }

    #[test]
    fn the_index_answers_as_a_pass_over_every_vm_does() {
        let mut rng = SimRng::new(7);
        let mut pmaps: Vec<Pmap> = (0..13).map(|_| Pmap::new(64)).collect();
        let mut targets = vec![None; 13];
        let mut v = Victims::new(13);
        for step in 0..5_000 {
            let vm = rng.below(13) as usize;
            match rng.below(4) {
                0 => targets[vm] = Some(rng.below(40)),
                1 => pmaps[vm].set(rng.below(64) as u32, PageState::Unbacked),
                _ => pmaps[vm].set(rng.below(64) as u32, PageState::Mapped),
            }
            v.mark(vm);
            let want = by_pass(&pmaps, &targets);
            let got = (
                v.most_above_target(&pmaps, &targets),
                v.most_own(&pmaps, &targets),
            );
            assert_eq!(got, want, "step {step}");
        }
    }

    #[test]
    fn ties_go_to_the_lowest_index_and_no_key_is_no_answer() {
        let mut t = MaxTree::new(5);
        assert_eq!(t.first_max(), None);
        t.set(3, 7);
        t.set(1, 7);
        assert_eq!(t.first_max(), Some(1));
        t.set(1, 0);
        assert_eq!(t.first_max(), Some(3));
        t.set(4, 8);
        assert_eq!(t.first_max(), Some(4));
    }
}
