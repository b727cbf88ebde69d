//! The JSON examples in the crate's documentation (the files in `json/`) decode into their types and encode back to the same JSON, and docs/api.md shows the same examples and names every field.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use memtide_api::{
    AppSnapshot, Applied, CacheSnapshot, Counters, DecisionRecord, DiskSnapshot, ErrorBody,
    HostSnapshot, Size, Snapshot, TaxRate, TenantPatch, TenantSnapshot, VmSnapshot, API_VERSION,
};

const SNAPSHOT: &str = include_str!("../json/snapshot.json");
const HOST: &str = include_str!("../json/host.json");
const TENANT: &str = include_str!("../json/tenant.json");
const APP: &str = include_str!("../json/app.json");
const CACHE: &str = include_str!("../json/cache.json");
const DISK: &str = include_str!("../json/disk.json");
const VM: &str = include_str!("../json/vm.json");
const DECISION: &str = include_str!("../json/decision.json");
const COUNTERS: &str = include_str!("../json/counters.json");
const TENANT_PATCH: &str = include_str!("../json/tenant-patch.json");
const TAX_RATE: &str = include_str!("../json/tax-rate.json");
const APPLIED: &str = include_str!("../json/applied.json");
const ERROR: &str = include_str!("../json/error.json");
const API_MD: &str = include_str!("../../../docs/api.md");
/// A lever's figure is documented with its metric, under "API key `<key>`".
const METRICS_MD: &str = include_str!("../../../docs/metrics.md");

/// Decodes `example` as a `T`, checks that it encodes back to the same JSON value (so the
/// example has every field, with the type the wire has), and returns it.
fn round_trip<T: Serialize + DeserializeOwned>(name: &str, example: &str) -> T {
    let value: T = serde_json::from_str(example)
        .unwrap_or_else(|e| panic!("json/{name} does not decode: {e}"));
    let want: Value = serde_json::from_str(example).unwrap();
    let got = serde_json::to_value(&value).unwrap();
    assert_eq!(got, want, "json/{name} does not encode back the same");
    value
}

/// As [`round_trip`], and the example is exactly what `memtide status --json` prints (pretty).
fn round_trip_pretty<T: Serialize + DeserializeOwned>(name: &str, example: &str) -> T {
    let value: T = round_trip(name, example);
    let text = serde_json::to_string_pretty(&value).unwrap() + "\n";
    assert_eq!(text, example, "json/{name} is not as serde_json prints it");
    value
}

#[test]
fn the_snapshot_examples_round_trip_and_agree() {
    let snapshot: Snapshot = round_trip_pretty("snapshot.json", SNAPSHOT);
    assert_eq!(snapshot.api_version, API_VERSION);
    let host: HostSnapshot = round_trip_pretty("host.json", HOST);
    let tenant: TenantSnapshot = round_trip_pretty("tenant.json", TENANT);
    let decision: DecisionRecord = round_trip_pretty("decision.json", DECISION);
    let counters: Counters = round_trip_pretty("counters.json", COUNTERS);
    assert_eq!(snapshot.host, host, "host.json is the snapshot's host");
    assert!(
        snapshot.tenants.contains(&tenant),
        "tenant.json is one of the snapshot's tenants"
    );
    assert_eq!(
        snapshot.decisions.last(),
        Some(&decision),
        "decision.json is the snapshot's newest decision"
    );
    assert_eq!(
        snapshot.counters, counters,
        "counters.json is the snapshot's"
    );
    // The examples show both a figure and its absence.
    assert!(snapshot.tenants.iter().any(|t| t.swap_bytes.is_none()));
    assert!(snapshot.tenants.iter().any(|t| t.held.is_some()));
    assert!(snapshot.tenants.iter().any(|t| t.held.is_none()));
    let app: AppSnapshot = round_trip_pretty("app.json", APP);
    assert!(
        snapshot
            .tenants
            .iter()
            .any(|t| t.app.as_ref() == Some(&app)),
        "app.json is a snapshot tenant's app"
    );
    assert!(snapshot.tenants.iter().any(|t| t.app.is_none()));
    let cache: CacheSnapshot = round_trip_pretty("cache.json", CACHE);
    assert!(
        snapshot
            .tenants
            .iter()
            .any(|t| t.cache.as_ref() == Some(&cache)),
        "cache.json is a snapshot tenant's cache"
    );
    assert!(snapshot.tenants.iter().any(|t| t.cache.is_none()));
    let disk: DiskSnapshot = round_trip_pretty("disk.json", DISK);
    assert!(
        snapshot
            .tenants
            .iter()
            .any(|t| t.disk.as_ref() == Some(&disk)),
        "disk.json is a snapshot tenant's disk"
    );
    assert!(snapshot.tenants.iter().any(|t| t.disk.is_none()));
    let vm: VmSnapshot = round_trip_pretty("vm.json", VM);
    assert!(
        snapshot.tenants.iter().any(|t| t.vm.as_ref() == Some(&vm)),
        "vm.json is a snapshot tenant's vm"
    );
    assert!(snapshot.tenants.iter().any(|t| t.vm.is_none()));
}

#[test]
fn the_body_examples_round_trip() {
    let patch: TenantPatch = round_trip("tenant-patch.json", TENANT_PATCH);
    assert_eq!(
        patch,
        TenantPatch {
            min: Some(Size::Text("512M".into())),
            max: Some(Size::Bytes(2 << 30)),
            shares: Some(2000),
        }
    );
    let rate: TaxRate = round_trip("tax-rate.json", TAX_RATE);
    assert_eq!(rate.tax_rate, 0.5);
    let applied: Applied = round_trip("applied.json", APPLIED);
    assert_eq!(applied, Applied::default());
    let error: ErrorBody = round_trip("error.json", ERROR);
    assert_eq!(error.error, "no tenant named \"x\"");
}

#[test]
fn docs_api_md_shows_the_same_bodies() {
    for (name, example) in [
        ("tenant-patch.json", TENANT_PATCH),
        ("tax-rate.json", TAX_RATE),
        ("applied.json", APPLIED),
        ("error.json", ERROR),
    ] {
        assert!(
            API_MD.contains(example.trim()),
            "docs/api.md does not show json/{name}: {}",
            example.trim()
        );
    }
}

/// Every key of a JSON object, and of the objects in it, with the path to it.
fn keys(value: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                out.push((path.to_string(), k.clone()));
                // state_ticks is keyed by state, not by field.
                if k != "state_ticks" {
                    keys(v, &format!("{path}.{k}"), out);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                keys(item, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn docs_api_md_names_every_snapshot_field() {
    let snapshot: Value = serde_json::from_str(SNAPSHOT).unwrap();
    let mut all = Vec::new();
    keys(&snapshot, "", &mut all);
    assert!(all.len() > 50, "{} fields", all.len());
    for (path, key) in all {
        // A list is named `tenants[]` in the table.
        assert!(
            API_MD.contains(&format!("`{key}`"))
                || API_MD.contains(&format!("`{key}[]`"))
                || (path == ".tenants[]" && METRICS_MD.contains(&format!("API key `{key}`"))),
            "neither docs/api.md nor (for a tenant's figure) docs/metrics.md names the \
             snapshot field {path}.{key}"
        );
    }
}
