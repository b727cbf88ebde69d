//! Memory units as newtypes: `Bytes` and 4 KiB `Pages`, with explicit conversions and no bare integers.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// Size of one page of machine or guest-physical memory, in bytes.
pub const PAGE_SIZE: u64 = 4096;

const MIB: u64 = 1024 * 1024;

/// An amount of memory in bytes.
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Bytes(pub u64);

/// An amount of memory in 4 KiB pages.
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Pages(pub u64);

impl Bytes {
    pub const ZERO: Bytes = Bytes(0);

    #[inline]
    pub fn from_mib(mib: u64) -> Bytes {
        Bytes(mib * MIB)
    }

    /// Converts a (possibly fractional) MiB figure, rounding to the nearest byte.
    pub fn from_mib_f64(mib: f64) -> Bytes {
        Bytes((mib * MIB as f64).round().max(0.0) as u64)
    }

    #[inline]
    pub fn as_mib_f64(self) -> f64 {
        self.0 as f64 / MIB as f64
    }

    /// Whole pages contained in this many bytes (rounds down).
    #[inline]
    pub fn to_pages_floor(self) -> Pages {
        Pages(self.0 / PAGE_SIZE)
    }

    /// Pages needed to hold this many bytes (rounds up).
    #[inline]
    pub fn to_pages_ceil(self) -> Pages {
        Pages(self.0.div_ceil(PAGE_SIZE))
    }

    #[inline]
    pub fn saturating_sub(self, other: Bytes) -> Bytes {
        Bytes(self.0.saturating_sub(other.0))
    }
}

impl Pages {
    pub const ZERO: Pages = Pages(0);

    /// No pages (for `skip_serializing_if`: a field left at zero stays out of the JSON).
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.0 == 0
    }

    #[inline]
    pub fn from_mib(mib: u64) -> Pages {
        Bytes::from_mib(mib).to_pages_floor()
    }

    /// Pages in a fractional MiB figure, rounded to the nearest page.
    pub fn from_mib_f64(mib: f64) -> Pages {
        Pages((mib * (MIB / PAGE_SIZE) as f64).round().max(0.0) as u64)
    }

    #[inline]
    pub fn to_bytes(self) -> Bytes {
        Bytes(self.0 * PAGE_SIZE)
    }

    #[inline]
    pub fn as_mib_f64(self) -> f64 {
        self.0 as f64 * PAGE_SIZE as f64 / MIB as f64
    }

    #[inline]
    pub fn saturating_sub(self, other: Pages) -> Pages {
        Pages(self.0.saturating_sub(other.0))
    }

    /// This amount scaled by a non-negative fraction, rounded down.
    #[inline]
    pub fn scale(self, fraction: f64) -> Pages {
        // `as` truncates, which floors a product that is never negative (and saturates, and
        // maps NaN to 0); `f64::floor` would be a call into libm on baseline x86-64.
        Pages((self.0 as f64 * fraction.max(0.0)) as u64)
    }

    #[inline]
    pub fn clamp_to(self, lo: Pages, hi: Pages) -> Pages {
        Pages(self.0.max(lo.0).min(hi.0.max(lo.0)))
    }
}

macro_rules! arithmetic {
    ($t:ident) => {
        impl Add for $t {
            type Output = $t;
            #[inline]
            fn add(self, rhs: $t) -> $t {
                $t(self.0 + rhs.0)
            }
        }
        impl Sub for $t {
            type Output = $t;
            /// Panics on underflow in debug builds, like integers: use `saturating_sub` where that can happen.
            #[inline]
            fn sub(self, rhs: $t) -> $t {
                $t(self.0 - rhs.0)
            }
        }
        impl AddAssign for $t {
            #[inline]
            fn add_assign(&mut self, rhs: $t) {
                self.0 += rhs.0;
            }
        }
        impl SubAssign for $t {
            #[inline]
            fn sub_assign(&mut self, rhs: $t) {
                self.0 -= rhs.0;
            }
        }
        impl Sum for $t {
            fn sum<I: Iterator<Item = $t>>(iter: I) -> $t {
                $t(iter.map(|x| x.0).sum())
            }
        }
        impl<'a> Sum<&'a $t> for $t {
            fn sum<I: Iterator<Item = &'a $t>>(iter: I) -> $t {
                $t(iter.map(|x| x.0).sum())
            }
        }
    };
}
arithmetic!(Bytes);
arithmetic!(Pages);

impl From<Pages> for Bytes {
    #[inline]
    fn from(p: Pages) -> Bytes {
        p.to_bytes()
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} MiB", self.as_mib_f64())
    }
}

impl fmt::Display for Pages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} MiB", self.as_mib_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_mib_is_256_pages() {
        assert_eq!(Pages::from_mib(1), Pages(256));
        assert_eq!(Pages(256).to_bytes(), Bytes::from_mib(1));
    }

    #[test]
    fn byte_to_page_conversion_rounds_as_named() {
        assert_eq!(Bytes(4097).to_pages_floor(), Pages(1));
        assert_eq!(Bytes(4097).to_pages_ceil(), Pages(2));
    }

    #[test]
    fn fractional_mib_rounds_to_nearest_page() {
        assert_eq!(Pages::from_mib_f64(263.3), Pages(67405));
        assert!((Pages(67405).as_mib_f64() - 263.3).abs() < 0.01);
    }

    #[test]
    fn clamp_to_prefers_the_floor_when_bounds_cross() {
        assert_eq!(Pages(5).clamp_to(Pages(10), Pages(8)), Pages(10));
        assert_eq!(Pages(50).clamp_to(Pages(10), Pages(20)), Pages(20));
    }
}
