//! Shape tests of content-based page sharing (ESX §4) on the simulated host: the scenarios that reproduce the paper's sharing figures show the paper's shape.

use crate::common::*;
use memtide_cli::record::RunRecord;

/// Host-wide sharing figures in MB, averaged over [from_s, to_s): shared, reclaimed, zero.
fn sharing_mb(r: &RunRecord, from_s: f64, to_s: f64) -> (f64, f64, f64) {
    let ticks: Vec<_> = r
        .ticks
        .iter()
        .filter(|t| t.time_s >= from_s && t.time_s < to_s)
        .map(|t| t.sharing.expect("the sim reports sharing"))
        .collect();
    assert!(!ticks.is_empty(), "no ticks in [{from_s}, {to_s})");
    let n = ticks.len() as f64;
    let mb = |f: &dyn Fn(&memtide_model::HostSharing) -> f64| ticks.iter().map(f).sum::<f64>() / n;
    (
        mb(&|s| s.shared.to_bytes().as_mib_f64()),
        mb(&|s| s.reclaimed().to_bytes().as_mib_f64()),
        mb(&|s| s.zero.unwrap_or_default().to_bytes().as_mib_f64()),
    )
}

#[test]
fn identical_vms_approach_two_thirds_shared_and_sixty_percent_reclaimed() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // VM n starts at (n - 1) x 30 min; n VMs are measured over the last 10 minutes before
    // VM n + 1 starts.
    for (seed, r) in run_seeds("esx-fig4.toml", None, &[], &[1, 2]) {
        let figures: Vec<(f64, f64, f64)> = (1..=10)
            .map(|n| sharing_mb(&r, n as f64 * 1800.0 - 600.0, n as f64 * 1800.0))
            .collect();
        let pct = |n: usize, mb: f64| 100.0 * mb / (40.0 * n as f64);
        for (i, (s, rec, z)) in figures.iter().enumerate() {
            println!(
                "seed {seed}: {} VMs: shared {s:.1} MB ({:.1}%), reclaimed {rec:.1} MB ({:.1}%), zero {z:.1} MB, shared - reclaimed {:.1} MB",
                i + 1,
                pct(i + 1, *s),
                pct(i + 1, *rec),
                s - rec
            );
        }
        // The table's own memory (ESX: < 0.5% of memory), against the machine's.
        let last = r.ticks.last().unwrap();
        let table = last.sharing.unwrap().metadata.unwrap();
        let share = table.0 as f64 / last.machine.0 as f64;
        println!(
            "seed {seed}: the table holds {} KiB, {:.3}% of the machine",
            table.0 / 1024,
            share * 100.0
        );
        assert!(
            share < 0.005,
            "seed {seed}: the table is {:.3}% of memory",
            share * 100.0
        );
        // One VM: about 5 MB reclaimed, about 55% of it zero pages.
        let (_, rec1, z1) = figures[0];
        assert!(
            (3.5..=6.5).contains(&rec1),
            "seed {seed}: one VM reclaims {rec1:.1} MB"
        );
        assert!(
            (0.45..=0.65).contains(&(z1 / rec1)),
            "seed {seed}: zero pages are {z1:.1} of {rec1:.1} MB reclaimed in one VM"
        );
        // Ten VMs: sharing approaches 67%, nearly 60% reclaimed.
        let (s10, rec10, _) = figures[9];
        assert!(
            (62.0..=72.0).contains(&pct(10, s10)),
            "seed {seed}: 10 VMs share {:.1}%",
            pct(10, s10)
        );
        assert!(
            (55.0..=64.0).contains(&pct(10, rec10)),
            "seed {seed}: 10 VMs reclaim {:.1}%",
            pct(10, rec10)
        );
        // After the jump from one VM to two, shared memory rises linearly: each VM adds
        // about the same.
        let steps: Vec<f64> = figures.windows(2).map(|w| w[1].0 - w[0].0).collect();
        let later = &steps[1..];
        let mean = later.iter().sum::<f64>() / later.len() as f64;
        assert!(
            steps[0] > mean,
            "seed {seed}: no jump from 1 to 2 VMs: {steps:?}"
        );
        for (i, step) in later.iter().enumerate() {
            assert!(
                (step - mean).abs() <= 0.15 * mean,
                "seed {seed}: VM {} adds {step:.1} MB shared, the mean is {mean:.1}",
                i + 3
            );
        }
        // The single copies (shared - reclaimed) stay nearly constant, so they fall as a share
        // of memory: they grow by less than a tenth of what shared memory does.
        let copies = |f: &(f64, f64, f64)| f.0 - f.1;
        let grown = copies(&figures[9]) - copies(&figures[1]);
        assert!(
            grown < 0.1 * (figures[9].0 - figures[1].0),
            "seed {seed}: the single copies grew by {grown:.1} MB from 2 to 10 VMs"
        );
        assert!(
            pct(10, copies(&figures[9])) < pct(2, copies(&figures[1])) / 3.0,
            "seed {seed}: the single copies do not fall as a share of memory"
        );
    }
}

#[test]
fn production_mixes_reclaim_from_seven_to_a_third_of_memory() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // Paper, Fig. 5: total MB; shared and reclaimed percent; zero pages MB (where given).
    let deployments = [
        ("esx-fig5a.toml", 2048.0, 42.9, 32.9, None),
        ("esx-fig5b.toml", 1846.0, 29.2, 18.7, Some(70.0)),
        ("esx-fig5c.toml", 1658.0, 10.0, 7.2, Some(25.0)),
    ];
    let mut reclaimed = Vec::new();
    for (file, total, paper_shared, paper_reclaimed, paper_zero) in deployments {
        let r = run_file(file, None, &[]);
        // The last 10 minutes of the half hour, as the paper's snapshots of running systems.
        let (s, rec, z) = sharing_mb(&r, 1200.0, 1800.0);
        let (sp, rp) = (100.0 * s / total, 100.0 * rec / total);
        println!(
            "{file}: shared {s:.0} MB ({sp:.1}%, paper {paper_shared}%), reclaimed {rec:.0} MB ({rp:.1}%, paper {paper_reclaimed}%), zero {z:.0} MB (paper {paper_zero:?})"
        );
        assert!(
            (sp - paper_shared).abs() <= 3.0,
            "{file}: {sp:.1}% shared, the paper {paper_shared}%"
        );
        assert!(
            (rp - paper_reclaimed).abs() <= 3.0,
            "{file}: {rp:.1}% reclaimed, the paper {paper_reclaimed}%"
        );
        if let Some(pz) = paper_zero {
            assert!(
                (z - pz).abs() <= 0.3 * pz,
                "{file}: {z:.0} MB of zero pages shared, the paper {pz} MB"
            );
        }
        reclaimed.push(rp);
    }
    assert!(
        reclaimed.windows(2).all(|w| w[0] > w[1]),
        "the deployments' order is the paper's: {reclaimed:?}"
    );
    assert!(
        reclaimed.iter().all(|&p| (6.0..=34.0).contains(&p)),
        "{reclaimed:?}"
    );
}

#[test]
fn share_before_swap_turns_boot_zeroing_into_sharing_and_allocation_follows_demand() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let r = run_file("esx-fig8.toml", None, &[]);
    let mb = |b: memtide_model::Bytes| b.as_mib_f64();
    let alloc = |t: &memtide_cli::record::TickRecord| -> f64 {
        t.rows.iter().map(|row| mb(row.allocated)).sum()
    };
    // Boot, before the balloon drivers load at 90 s: Windows zeroes every page, the host is
    // overcommitted at once, and share before swap reclaims zero pages where it would page.
    let boot: Vec<_> = r.ticks.iter().filter(|t| t.time_s < 90.0).collect();
    let zero = boot
        .iter()
        .map(|t| mb(t.sharing.unwrap().zero.unwrap().to_bytes()))
        .fold(0.0, f64::max);
    let swapped = boot
        .iter()
        .map(|t| mb(t.host_swap_used))
        .fold(0.0, f64::max);
    let peak = boot.iter().map(|t| alloc(t)).fold(0.0, f64::max);
    println!("boot: {zero:.0} MB of zero pages shared, {swapped:.0} MB swapped at most, allocations add up to {peak:.0} MB");
    assert!(
        zero >= 200.0,
        "only {zero:.0} MB of zero pages shared at boot (paper: 325 MB)"
    );
    assert!(
        swapped <= 60.0 && swapped < zero / 4.0,
        "{swapped:.0} MB went to swap at boot against {zero:.0} MB shared (paper: 35 against 325 MB)"
    );
    assert!(
        peak > 1100.0,
        "allocations add up to {peak:.0} MB at boot, not past the 1 GB for VMs (paper: ~1200 MB)"
    );
    // Then the balloons reclaim, and the host stays in the high and soft states.
    let at = |s: f64| r.ticks.iter().find(|t| t.time_s >= s).unwrap();
    let balloons: f64 = at(120.0)
        .rows
        .iter()
        .map(|row| mb(row.balloon_size()))
        .sum();
    assert!(balloons >= 150.0, "balloons hold {balloons:.0} MB at 120 s");
    let calm = r
        .ticks
        .iter()
        .filter(|t| {
            matches!(
                t.state,
                memtide_model::ReclamationState::High | memtide_model::ReclamationState::Soft
            )
        })
        .count() as f64
        / r.ticks.len() as f64;
    assert!(
        calm >= 0.95,
        "{:.1}% of the run in high or soft",
        calm * 100.0
    );
    // Sharing keeps saving memory over the run (paper: about 200 MB).
    let (_, reclaimed, _) = sharing_mb(&r, 600.0, 3600.0);
    println!("after boot: {reclaimed:.0} MB reclaimed by sharing on average");
    assert!(
        (150.0..=350.0).contains(&reclaimed),
        "{reclaimed:.0} MB reclaimed after boot"
    );
    // The SQL server idles from 10 min: its allocation falls toward its min (160 MB); its long
    // query from 35 min gets memory back quickly.
    let sql = |a, b| mean(&r, "sql-server", a, b, |row| row.allocated.as_mib_f64());
    let (busy, idle, query) = (sql(300.0, 600.0), sql(1800.0, 2100.0), sql(2400.0, 2700.0));
    println!("sql-server: {busy:.0} MB busy, {idle:.0} MB idle, {query:.0} MB in its long query");
    assert!(
        (150.0..=200.0).contains(&idle),
        "the idle SQL server holds {idle:.0} MB (min 160)"
    );
    assert!(
        query >= idle + 80.0,
        "the SQL server's query gets {query:.0} MB against {idle:.0} idle"
    );
    // The MetaFrame server's allocation grows over the run as its demand does.
    let mf = |a, b| {
        mean(&r, "metaframe-server", a, b, |row| {
            row.allocated.as_mib_f64()
        })
    };
    let (early, late) = (mf(300.0, 900.0), mf(3000.0, 3600.0));
    println!("metaframe-server: {early:.0} MB early, {late:.0} MB late");
    assert!(
        late > early + 40.0,
        "the MetaFrame server {early:.0} -> {late:.0} MB"
    );
}

#[test]
fn hot_io_page_remapping_cuts_bounce_copies_by_orders_of_magnitude() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // Both variants on the same seeds: the same buffer pages in the same places, the same
    // transfers; only whether a page past 32 copies is remapped into low memory differs.
    let last = |variant: &str| -> Vec<(u64, memtide_model::IoRemapping)> {
        run_seeds("esx-io-remap.toml", Some(variant), &[], &[1, 2])
            .into_iter()
            .map(|(seed, r)| {
                let counts = r.ticks.last().unwrap().remapping;
                (seed, counts.expect("the sim reports I/O remapping"))
            })
            .collect()
    };
    for ((seed, remap), (_, copy)) in last("remap").into_iter().zip(last("copy")) {
        println!("seed {seed}: remap {remap:?}\nseed {seed}: copy  {copy:?}");
        assert_eq!(
            remap.transmits, copy.transmits,
            "seed {seed}: the same transfers"
        );
        // Four VMs, 20,000 transfers a second each, for the 599 s up to the last observation.
        assert_eq!(copy.transmits, 4 * 20_000 * 599);
        // Without remapping, every transfer from the half of the buffers placed high (4 of
        // 8 GB is low) is copied.
        let high_share = copy.copies as f64 / copy.transmits as f64;
        assert!(
            (0.4..0.6).contains(&high_share),
            "seed {seed}: {high_share}"
        );
        assert_eq!((copy.remaps, copy.avoided), (0, 0));
        // With it, each high buffer page is copied 33 times, then remapped: several orders
        // of magnitude fewer copies (the paper's words; it gives no figure).
        assert!(
            remap.copies * 1000 < copy.copies,
            "seed {seed}: {} copies against {}",
            remap.copies,
            copy.copies
        );
        assert!(remap.remaps <= 4 * 256 && remap.remaps > 0, "seed {seed}");
        assert_eq!(remap.remapped.0, remap.remaps, "nothing left low memory");
        assert_eq!(remap.refused, 0, "low memory to spare on this host");
        assert_eq!(
            remap.avoided + remap.copies,
            copy.copies,
            "seed {seed}: every copy not made was avoided by a remap"
        );
    }
}
