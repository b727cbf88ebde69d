//! timeline.csv: one row per tick per running tenant, with fixed float formatting so the same run gives the same bytes.
//!
//! A [`TimelineWriter`] writes each tick's rows as the tick comes, so the timeline never sits
//! in memory: what it holds is the tenants' names and one line's buffer.

use crate::record::{TenantMeta, TickRecord};
use memtide_model::TenantId;
use memtide_runner::columns::{csv_field, push_fixed3, TimelineColumn, TENANT_COLUMNS};
use std::collections::BTreeMap;
use std::io::Write;

/// The columns after `time_s` and `tenant`, in order: the figures' table's timeline columns.
fn columns() -> impl Iterator<Item = &'static TimelineColumn> {
    TENANT_COLUMNS.iter().filter_map(|c| c.timeline.as_ref())
}

/// The header line (without the newline).
pub fn header() -> String {
    let mut h = "time_s,tenant".to_string();
    for c in columns() {
        h.push(',');
        h.push_str(c.header);
    }
    h
}

/// The timeline written tick by tick to `W`.
pub struct TimelineWriter<W: Write> {
    out: W,
    /// Each tenant's name as a CSV field.
    names: BTreeMap<TenantId, String>,
    line: String,
}

impl<W: Write> TimelineWriter<W> {
    /// Writes the header to `out`; rows name `tenants`.
    pub fn new(mut out: W, tenants: &[TenantMeta]) -> std::io::Result<TimelineWriter<W>> {
        out.write_all(header().as_bytes())?;
        out.write_all(b"\n")?;
        Ok(TimelineWriter {
            out,
            names: tenants.iter().map(|t| (t.id, csv_field(&t.name))).collect(),
            line: String::with_capacity(256),
        })
    }

    /// Writes one row per tenant of the tick.
    pub fn add(&mut self, tick: &TickRecord) -> std::io::Result<()> {
        for row in &tick.rows {
            let line = &mut self.line;
            line.clear();
            push_fixed3(line, tick.time_s);
            line.push(',');
            match self.names.get(&row.tenant) {
                Some(name) => line.push_str(name),
                None => line.push_str(&row.tenant.0.to_string()),
            }
            for c in columns() {
                line.push(',');
                (c.write)(line, tick, row);
            }
            line.push('\n');
            self.out.write_all(line.as_bytes())?;
        }
        Ok(())
    }

    /// Flushes and gives back the writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::test_record::record;

    fn csv() -> String {
        let r = record();
        let mut w = TimelineWriter::new(Vec::new(), &r.tenants).unwrap();
        for tick in &r.ticks {
            w.add(tick).unwrap();
        }
        String::from_utf8(w.finish().unwrap()).unwrap()
    }

    #[test]
    fn the_header_is_the_documented_one() {
        assert_eq!(
            header(),
            "time_s,tenant,allocated_mb,target_mb,active_estimate_mb,working_set_mb,balloon_mb,host_swapped_mb,throughput,latency_ms,state,swap_ins,refaults,host_swap_ins,blocked,shared_mb,ios,fsync_ms,reason"
        );
    }

    #[test]
    fn one_row_per_tick_per_running_tenant() {
        // a runs 4 ticks, b 2, c never.
        assert_eq!(csv().lines().count(), 1 + 4 + 2);
    }

    #[test]
    fn rows_use_fixed_decimals_and_quote_names_with_commas() {
        let text = csv();
        let first = text.lines().nth(1).unwrap();
        assert!(
            first.starts_with(
                "0.000,a,100.000,110.000,105.000,100.000,156.000,0.000,0.000,0.000,high,1,2,0,0,"
            ),
            "{first}"
        );
        let reason = crate::output::test_record::reason().to_string();
        assert!(
            first.ends_with(&format!(",{}", csv_field(&reason))),
            "{first}"
        );
        assert_eq!(csv_field("share, \"tax\""), "\"share, \"\"tax\"\"\"");
        assert!(text.contains("\n2.000,\"b, <web>\",50.000"), "{text}");
    }

    #[test]
    fn every_row_has_as_many_fields_as_the_header() {
        let text = csv();
        let columns = header().split(',').count();
        for line in text.lines().skip(1) {
            // Unquoted commas only: count outside quotes.
            let mut n = 1;
            let mut quoted = false;
            for c in line.chars() {
                match c {
                    '"' => quoted = !quoted,
                    ',' if !quoted => n += 1,
                    _ => {}
                }
            }
            assert_eq!(n, columns, "{line}");
        }
    }
}
