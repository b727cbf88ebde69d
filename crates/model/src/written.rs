//! Memory sizes (`"512M"`, `"1GiB"`, bytes) and durations (`"500ms"`, `"1s"`, `"2m"`) as people write them, and back: the one parser behind the configuration layer's `Size` and `Duration` (crates/config), the API and the toucher; and the check that a server's URL carries no credentials.

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// What a size string looks like, for messages.
pub const SIZE_FORMS: &str =
    "write bytes as an integer or a string with a binary unit such as \"512M\", \"1G\" or \"1GiB\" (K, M, G, T = KiB, MiB, GiB, TiB)";

/// What a duration string looks like, for messages.
pub const DURATION_FORMS: &str =
    "write a string with a unit such as \"500ms\", \"1s\" or \"2m\" (ms, s, m, h)";

/// Bytes in a size string: a number, optionally with a fraction, then an optional binary unit
/// (`K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB`, `B`; any case). The result must be whole
/// bytes. The error says what is wrong (without the value).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = split_number(text)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => KIB,
        "m" | "mib" => MIB,
        "g" | "gib" => GIB,
        "t" | "tib" => TIB,
        "kb" | "mb" | "gb" | "tb" => {
            let letter = &unit[..1];
            return Err(format!(
                "is ambiguous (decimal or binary?): write {letter} or {letter}iB, both binary"
            ));
        }
        _ => return Err(format!("has an unknown unit {unit:?}; {SIZE_FORMS}")),
    };
    let bytes = scaled(&number, scale as u128).ok_or_else(|| "is too large".to_string())?;
    match bytes {
        Scaled::Whole(b) => u64::try_from(b).map_err(|_| "is too large".to_string()),
        Scaled::Fractional => Err("is not a whole number of bytes".to_string()),
    }
}

/// A duration string: a number, optionally with a fraction, then a unit (`ms`, `s`, `m`,
/// `h`). The error says what is wrong (without the value).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let (number, unit) = split_number(text)?;
    let nanos_per: u128 = match unit {
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" => return Err(format!("has no unit; {DURATION_FORMS}")),
        _ => return Err(format!("has an unknown unit {unit:?}; {DURATION_FORMS}")),
    };
    match scaled(&number, nanos_per) {
        Some(Scaled::Whole(n)) => u64::try_from(n)
            .map(std::time::Duration::from_nanos)
            .map_err(|_| "is too long".to_string()),
        Some(Scaled::Fractional) => Err("is finer than a nanosecond".to_string()),
        None => Err("is too long".to_string()),
    }
}

/// A size as the configuration would write it: the largest binary unit that divides it
/// (`"512M"`, `"1536M"`, `"1G"`), else bytes (`"1000"`).
pub fn format_size(bytes: u64) -> String {
    for (unit, scale) in [("T", TIB), ("G", GIB), ("M", MIB), ("K", KIB)] {
        if bytes != 0 && bytes.is_multiple_of(scale) {
            return format!("{}{unit}", bytes / scale);
        }
    }
    bytes.to_string()
}

/// A duration as the configuration would write it: `"2m"`, `"30s"`, `"500ms"`, `"1.5s"`.
pub fn format_duration(d: std::time::Duration) -> String {
    let nanos = d.as_nanos();
    if nanos != 0 && nanos.is_multiple_of(60_000_000_000) && nanos >= 120_000_000_000 {
        format!("{}m", nanos / 60_000_000_000)
    } else if nanos.is_multiple_of(1_000_000_000) {
        format!("{}s", nanos / 1_000_000_000)
    } else if nanos.is_multiple_of(1_000_000) {
        format!("{}ms", nanos / 1_000_000)
    } else {
        let frac = format!("{:09}", nanos % 1_000_000_000);
        format!("{}.{}s", nanos / 1_000_000_000, frac.trim_end_matches('0'))
    }
}

/// The number and the unit of `"1.5 GiB"`: digits with at most one `.` and an optional
/// exponent (`1.5e3`, `2E-1`; no unit starts with an `e`), written out as plain decimal digits,
/// then the rest (a space between number and unit is allowed; spaces around the whole are
/// refused, as a value with them is more likely a mistake than a size).
fn split_number(text: &str) -> Result<(String, &str), String> {
    if text.trim() != text {
        return Err("has spaces around it; write it without them".to_string());
    }
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, rest) = text.split_at(end);
    let digits = number.chars().filter(char::is_ascii_digit).count();
    let dots = number.matches('.').count();
    if digits == 0 || dots > 1 {
        return Err("does not start with a number".to_string());
    }
    // An exponent: `e`, an optional sign, digits.
    let exponent = rest.strip_prefix(['e', 'E']).and_then(|e| {
        let unsigned = e.strip_prefix(['+', '-']).unwrap_or(e);
        let len = unsigned
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(unsigned.len());
        (len > 0).then(|| {
            let taken = 1 + (e.len() - unsigned.len()) + len;
            (&rest[1..taken], &rest[taken..])
        })
    });
    let Some((exponent, unit)) = exponent else {
        return Ok((number.to_string(), rest.trim()));
    };
    let exponent: i32 = exponent
        .parse()
        .ok()
        .filter(|e: &i32| e.abs() <= MAX_EXPONENT)
        .ok_or_else(|| format!("has an exponent beyond ±{MAX_EXPONENT}"))?;
    Ok((shift(number, exponent), unit.trim()))
}

/// The largest exponent a number may carry: beyond it every size and duration is out of
/// range, or finer than a byte or a nanosecond.
const MAX_EXPONENT: i32 = 40;

/// `number` (digits, maybe one `.`) times `10^exponent`, as digits with maybe one `.`.
fn shift(number: &str, exponent: i32) -> String {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let digits = format!("{int}{frac}");
    // Where the point falls in `digits`, padded with zeros on either side as needed.
    let point = int.len() as i64 + i64::from(exponent);
    if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (a, b) = digits.split_at(point as usize);
        format!("{a}.{b}")
    }
}

enum Scaled {
    Whole(u128),
    Fractional,
}

/// `number` (digits, maybe one `.`) times `scale`, exactly; `None` on overflow.
fn scaled(number: &str, scale: u128) -> Option<Scaled> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let mut value: u128 = 0;
    for c in int.chars() {
        value = value
            .checked_mul(10)?
            .checked_add(u128::from(c.to_digit(10)?))?;
    }
    let mut total = value.checked_mul(scale)?;
    let frac = frac.trim_end_matches('0');
    if !frac.is_empty() {
        if frac.len() > 30 {
            return Some(Scaled::Fractional);
        }
        let mut f: u128 = 0;
        for c in frac.chars() {
            f = f
                .checked_mul(10)?
                .checked_add(u128::from(c.to_digit(10)?))?;
        }
        let denominator = 10u128.checked_pow(frac.len() as u32)?;
        let numerator = f.checked_mul(scale)?;
        if !numerator.is_multiple_of(denominator) {
            return Some(Scaled::Fractional);
        }
        total = total.checked_add(numerator / denominator)?;
    }
    Some(Scaled::Whole(total))
}

/// A server URL that carries credentials (`redis://:secret@host:6379`, `mysql://user:pw@host`),
/// as it may be shown: the user and password replaced by `***`; `None` for a URL without them.
/// A password in a URL ends up in a command line (`ps` shows it to every local user) and in
/// error lines, so memtide refuses such URLs and takes passwords from files only.
pub fn url_with_credentials(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (_, host) = authority.rsplit_once('@')?;
    let path = &rest[authority.len()..];
    Some(format!("{scheme}://***@{host}{path}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration as StdDuration;

    #[test]
    fn numbers_in_exponent_form_parse_or_are_refused_as_numbers() {
        assert_eq!(parse_size("1.5e3K"), Ok(1_536_000));
        assert_eq!(parse_size("2E1M"), Ok(20 << 20));
        assert_eq!(parse_size("1e3"), Ok(1000));
        assert_eq!(parse_size("1e9"), Ok(1_000_000_000));
        assert_eq!(
            parse_duration("2e1s"),
            Ok(std::time::Duration::from_secs(20))
        );
        assert_eq!(
            parse_duration("1.5e-1s"),
            Ok(std::time::Duration::from_millis(150))
        );
        assert_eq!(
            parse_size("1e-9M"),
            Err("is not a whole number of bytes".to_string())
        );
        assert_eq!(parse_duration("1e30s"), Err("is too long".to_string()));
        assert_eq!(
            parse_duration("1e400s"),
            Err("has an exponent beyond ±40".to_string())
        );
        // An `e` without digits is no exponent.
        assert!(parse_size("1eM")
            .unwrap_err()
            .contains("unknown unit \"eM\""));
    }

    #[test]
    fn sizes_take_binary_units_in_both_forms_and_any_case() {
        assert_eq!(parse_size("512M"), Ok(512 * MIB));
        assert_eq!(parse_size("512MiB"), Ok(512 * MIB));
        assert_eq!(parse_size("1GiB"), Ok(GIB));
        assert_eq!(parse_size("1g"), Ok(GIB));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("2T"), Ok(2 * TIB));
        assert_eq!(parse_size("1.5G"), Ok(1536 * MIB));
        assert_eq!(parse_size("64 M"), Ok(64 * MIB));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("100B"), Ok(100));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn bad_sizes_say_why() {
        assert!(parse_size("512MB").unwrap_err().contains("ambiguous"));
        assert!(parse_size("12X").unwrap_err().contains("unknown unit"));
        assert!(parse_size("M").unwrap_err().contains("number"));
        assert!(parse_size("-5M").unwrap_err().contains("number"));
        assert!(parse_size("1.2.3M").unwrap_err().contains("number"));
        assert!(parse_size("0.1K").unwrap_err().contains("whole number"));
        assert!(parse_size("99999999999T")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_size(&"9".repeat(60))
            .unwrap_err()
            .contains("too large"));
        assert!(parse_size("").is_err());
        for text in ["1X", "1..2M", "-1M", "1e-9", "1MB", "1Mi"] {
            assert!(parse_size(text).is_err(), "{text} should be refused");
        }
    }

    #[test]
    fn sizes_and_durations_with_spaces_around_them_are_refused() {
        for text in [" 1G", "1G ", " 64 M ", "\t1G"] {
            let err = parse_size(text).unwrap_err();
            assert!(err.contains("spaces around it"), "{text:?}: {err}");
        }
        assert!(parse_duration(" 1s")
            .unwrap_err()
            .contains("spaces around it"));
    }

    #[test]
    fn durations_take_ms_s_m_h() {
        assert_eq!(parse_duration("500ms"), Ok(StdDuration::from_millis(500)));
        assert_eq!(parse_duration("1s"), Ok(StdDuration::from_secs(1)));
        assert_eq!(parse_duration("2m"), Ok(StdDuration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(StdDuration::from_secs(3600)));
        assert_eq!(parse_duration("1.5s"), Ok(StdDuration::from_millis(1500)));
        assert!(parse_duration("1").unwrap_err().contains("no unit"));
        assert!(parse_duration("1d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("1S").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("s").is_err());
        assert!(parse_duration(&format!("{}s", "9".repeat(40)))
            .unwrap_err()
            .contains("too long"));
        assert!(parse_duration("99999999999h")
            .unwrap_err()
            .contains("too long"));
    }

    #[test]
    fn formatting_reads_back() {
        for bytes in [0, 1000, 4096, 512 * MIB, 1536 * MIB, GIB, 3 * TIB] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
        assert_eq!(format_size(512 * MIB), "512M");
        assert_eq!(format_size(GIB), "1G");
        for ms in [0, 10, 500, 1000, 1500, 60_000, 120_000, 3_600_000] {
            let d = StdDuration::from_millis(ms);
            assert_eq!(parse_duration(&format_duration(d)), Ok(d), "{ms}");
        }
        let odd = StdDuration::from_nanos(1_000_000_001);
        assert_eq!(parse_duration(&format_duration(odd)), Ok(odd));
        assert_eq!(format_duration(StdDuration::from_secs(60)), "60s");
        assert_eq!(format_duration(StdDuration::from_secs(120)), "2m");
    }

    #[test]
    fn a_url_with_a_user_or_password_is_shown_without_them() {
        assert_eq!(
            url_with_credentials("redis://:s3cret@127.0.0.1:6379/0").as_deref(),
            Some("redis://***@127.0.0.1:6379/0")
        );
        assert_eq!(
            url_with_credentials("mysql://root:pw@db:3306").as_deref(),
            Some("mysql://***@db:3306")
        );
        assert_eq!(
            url_with_credentials("memcache://a@b@host:11211").as_deref(),
            Some("memcache://***@host:11211")
        );
        for clean in [
            "redis://127.0.0.1:6379",
            "unix:///run/a@b/redis.sock",
            "no-scheme@x",
        ] {
            assert_eq!(url_with_credentials(clean), None, "{clean}");
        }
    }
}
