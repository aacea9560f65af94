//! Histories that cannot be checked are refused with typed errors, files are
//! loaded with errors that name the problem, and the dbcop export has dbcop's
//! shape.

mod common;

use bytes::Bytes;
use causeway_check::dbcop::{DbcopEvent, DbcopTransaction, ExportError, to_dbcop, to_dbcop_json};
use causeway_check::{CheckConfig, CheckError, ModelError, Status, check, load_history};
use causeway_core::{ClientId, DcId, History, Op, OpKind, OpRecord, OpResult};
use common::{H, k};

fn model_error(h: &History) -> ModelError {
    let r = check(h, &CheckConfig::default());
    assert!(!r.passed);
    assert!(r.checks.iter().all(|c| matches!(c.status, Status::Skipped { .. })));
    r.invalid.expect("refused")
}

#[test]
fn two_writes_of_one_value_are_ambiguous() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.put(1, "x", 1);
    h.get(2, "x", Some(1));
    let e = model_error(&h.history());
    assert_eq!(e, ModelError::DuplicateWrite { key: "x".into(), value: "w1".into(), first: 0, second: 1 });
    assert!(e.to_string().contains("ops #0 and #1 both write w1 to key x"), "{e}");
    // The same value under two keys is two writes.
    let mut ok = H::new();
    ok.put(0, "x", 1);
    ok.put(1, "y", 1);
    assert!(check(&ok.history(), &CheckConfig::default()).passed);
}

#[test]
fn untagged_values_are_identified_by_their_bytes() {
    let rec = |client, op, result, t| OpRecord {
        client: ClientId(client),
        dc: DcId(0),
        op,
        result,
        invoke_us: t,
        complete_us: t + 1,
        batch: None,
        levels: None,
        checking_group: None,
    };
    let hello = Bytes::from_static(b"hello");
    let h = History {
        protocol: "t".into(),
        ops: vec![
            rec(0, Op::Put { key: k("x"), value: hello.clone() }, OpResult::Put, 0),
            rec(1, Op::Get { key: k("x") }, OpResult::Get(Some(hello.clone())), 10),
            rec(1, Op::Get { key: k("x") }, OpResult::Get(Some(Bytes::from_static(b"bye"))), 20),
        ],
    };
    let r = check(&h, &CheckConfig::default());
    assert_eq!(r.failed_kinds(), vec![causeway_check::Kind::ThinAirRead]);
    assert!(r.to_string().contains("read x=\"bye\""), "{r}");
}

#[test]
fn overlapping_session_ops_are_refused() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.get(0, "x", Some(1));
    let mut hist = h.history();
    hist.ops[1].invoke_us = hist.ops[0].complete_us - 1;
    assert_eq!(model_error(&hist), ModelError::OverlappingSession { client: ClientId(0), first: 0, second: 1 });
}

#[test]
fn results_must_fit_their_ops() {
    let mut h = H::new();
    h.get(0, "x", None);
    let mut hist = h.history();
    hist.ops[0].result = OpResult::Put;
    assert!(matches!(model_error(&hist), ModelError::ResultMismatch { index: 0, result: "put", .. }));

    let mut h = H::new();
    h.rot(0, &[("x", None), ("y", None)]);
    let mut hist = h.history();
    hist.ops[0].result = OpResult::Rot(vec![None]);
    assert_eq!(model_error(&hist), ModelError::RotArity { index: 0, keys: 2, values: 1 });

    let mut h = H::new();
    h.rot(0, &[("x", None), ("x", None)]);
    assert_eq!(model_error(&h.history()), ModelError::DuplicateKey { index: 0, op: OpKind::Rot, key: "x".into() });
}

fn temp(name: &str, contents: &[u8]) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap();
    p
}

#[test]
fn load_history_round_trips_and_names_errors() {
    let mut h = H::new();
    h.put(0, "photo", 41);
    h.get(1, "photo", None);
    h.rot(1, &[("photo", Some(41)), ("album", None)]);
    let hist = h.history();
    let p = temp("ok.json", &serde_json::to_vec(&hist).unwrap());
    assert_eq!(load_history(&p).unwrap(), hist);

    let missing = p.with_file_name("missing.json");
    let e = load_history(&missing).unwrap_err();
    assert!(matches!(e, CheckError::Io { .. }), "{e}");
    assert!(e.to_string().contains("missing.json"), "{e}");

    let bad = temp("bad.json", b"{\"protocol\": \"x\",\n \"ops\": [{\"client\": \"nope\"}]}");
    let e = load_history(&bad).unwrap_err();
    let CheckError::Json { line, .. } = &e else { panic!("{e}") };
    assert_eq!(*line, 2);
    assert!(e.to_string().contains("bad.json") && e.to_string().contains("not valid history JSON"), "{e}");
}

#[test]
fn dbcop_export_has_dbcops_shape() {
    let mut h = H::new();
    h.put(0, "x", 7); // #0
    h.get(1, "x", Some(7)); // #1
    h.rot(1, &[("y", None), ("x", Some(7))]); // #2
    let j: serde_json::Value = serde_json::from_str(&to_dbcop_json(&h.history()).unwrap()).unwrap();
    // The initial state is a transaction of its own (x and y at versions 8
    // and 9, above every write's, and the marker variable 2 at 10), read by
    // the first transaction of every session; a read of ∅ reads it.
    let start = serde_json::json!({ "events": [{ "Read": { "variable": 2, "version": 10 } }], "committed": true });
    assert_eq!(
        j["data"],
        serde_json::json!([
            [{ "events": [
                { "Write": { "variable": 0, "version": 8 } },
                { "Write": { "variable": 1, "version": 9 } },
                { "Write": { "variable": 2, "version": 10 } }
            ], "committed": true }],
            [start, { "events": [{ "Write": { "variable": 0, "version": 7 } }], "committed": true }],
            [
                start,
                { "events": [{ "Read": { "variable": 0, "version": 7 } }], "committed": true },
                { "events": [{ "Read": { "variable": 1, "version": 9 } }, { "Read": { "variable": 0, "version": 7 } }], "committed": true }
            ]
        ])
    );
    assert_eq!(
        j["params"],
        serde_json::json!({ "id": 0, "n_node": 3, "n_variable": 3, "n_transaction": 3, "n_event": 3 })
    );
    assert_eq!(j["start"], "1970-01-01T00:00:00.000010000+00:00");
    assert!(j["info"].as_str().unwrap().contains("hand-built"));
    let e = to_dbcop(&h.history()).unwrap();
    assert_eq!(e.variables, vec!["x", "y", "⟨initial state marker⟩"]);
    assert!(e.tagged_versions);
    assert_eq!(e.versions, vec![(7, 0)]);
}

#[test]
fn dbcop_export_handles_untagged_values_and_failed_puts() {
    let mut h = H::new();
    h.put(0, "x", 5);
    h.failed_put(0, "x", 6); // read below: its own session
    h.failed_put(0, "y", 8); // never read: uncommitted
    h.get(1, "x", Some(6));
    h.get(1, "y", None);
    let mut hist = h.history();
    // An untagged value forces dense versions.
    hist.ops.push(OpRecord {
        client: ClientId(2),
        dc: DcId(0),
        op: Op::Put { key: k("z"), value: Bytes::from_static(b"plain") },
        result: OpResult::Put,
        invoke_us: 1_000,
        complete_us: 1_001,
        batch: None,
        levels: None,
        checking_group: None,
    });
    let e = to_dbcop(&hist).unwrap();
    assert!(!e.tagged_versions);
    assert_eq!(e.versions, vec![(1, 0), (2, 1), (3, 2), (4, 5)]);
    let d = &e.history.data;
    assert_eq!(d.len(), 5, "the initial state, three clients and one session for the read failed put");
    // Client 0: its start, then x=5; the failed y=8 nobody read is left out,
    // and the failed x=6 someone read is in a session of its own, ordered
    // after x=5 by a marker (variable 4: x, y, z, the initial marker, then
    // this one) that x=5's transaction writes and it reads.
    assert_eq!(d[1].len(), 2);
    assert!(d.iter().flatten().all(|t| t.committed));
    assert_eq!(
        d[1][1].events,
        vec![DbcopEvent::Write { variable: 0, version: 1 }, DbcopEvent::Write { variable: 4, version: 9 }]
    );
    assert_eq!(d[2][1].events, vec![DbcopEvent::Read { variable: 0, version: Some(2) }]);
    assert_eq!(
        d[2][2].events,
        vec![DbcopEvent::Read { variable: 1, version: Some(6) }],
        "y=∅ reads y's initial version"
    );
    assert_eq!(
        d[4],
        vec![DbcopTransaction {
            events: vec![
                DbcopEvent::Read { variable: 4, version: Some(9) },
                DbcopEvent::Write { variable: 0, version: 2 }
            ],
            committed: true
        }]
    );
}

#[test]
fn dbcop_export_refuses_thin_air_and_ambiguous_histories() {
    let mut h = H::new();
    h.get(0, "x", Some(3));
    assert_eq!(to_dbcop(&h.history()).unwrap_err(), ExportError::ThinAirRead { op: 0, key: "x".into() });
    let mut h = H::new();
    h.put(0, "x", 3);
    h.put(0, "x", 3);
    assert!(matches!(to_dbcop(&h.history()).unwrap_err(), ExportError::Model(ModelError::DuplicateWrite { .. })));
}

#[test]
fn dbcop_export_makes_a_write_only_transaction_one_transaction() {
    let mut h = H::new();
    h.wot(0, &[("y", 3), ("x", 4)]); // #0
    h.rot(1, &[("x", Some(4)), ("y", Some(3))]); // #1
    let e = to_dbcop(&h.history()).unwrap();
    // Session 0 is the initial transaction; each session starts by reading its marker.
    assert_eq!(
        e.history.data[1][1].events,
        vec![DbcopEvent::Write { variable: 1, version: 3 }, DbcopEvent::Write { variable: 0, version: 4 }]
    );
    assert_eq!(
        e.history.data[2][1].events,
        vec![DbcopEvent::Read { variable: 0, version: Some(4) }, DbcopEvent::Read { variable: 1, version: Some(3) }]
    );
    assert_eq!(e.versions, vec![(3, 0), (4, 0)], "both versions map back to the one op");
    // A WOT naming a key twice is refused by name.
    let mut h = H::new();
    h.wot(0, &[("x", 1), ("x", 2)]);
    assert_eq!(model_error(&h.history()), ModelError::DuplicateKey { index: 0, op: OpKind::Wot, key: "x".into() });
}

#[test]
fn batches_must_be_recorded_as_puts_and_may_overlap_only_themselves() {
    // A batch's puts share their times: not an overlapping session.
    let mut h = H::new();
    let writes = h.batch(0, &[("x", 1), ("y", 2)]);
    h.get(0, "x", Some(1));
    assert!(check(&h.history(), &CheckConfig::default()).passed);
    // Two batches may not overlap each other.
    let mut hist = h.history();
    hist.ops[writes[1]].batch = Some(99);
    assert!(matches!(model_error(&hist), ModelError::OverlappingSession { .. }));
    // A batch recorded whole, or a batch number on something else.
    let mut hist = h.history();
    hist.ops.push(OpRecord {
        client: ClientId(1),
        dc: DcId(0),
        op: Op::Batch { writes: vec![(k("z"), common::v(5))] },
        result: OpResult::Put,
        invoke_us: 1_000,
        complete_us: 1_001,
        batch: None,
        levels: None,
        checking_group: None,
    });
    assert_eq!(model_error(&hist), ModelError::UnexpandedBatch { index: 3 });
    let mut hist = h.history();
    hist.ops[2].batch = Some(7);
    assert_eq!(model_error(&hist), ModelError::BatchNotPut { index: 2, batch: 7, op: OpKind::Get });
    // dbcop's sessions have no fork: the export refuses.
    assert_eq!(to_dbcop(&h.history()).unwrap_err(), ExportError::Batch { op: 0 });
}
