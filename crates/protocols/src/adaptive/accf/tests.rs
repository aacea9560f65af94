//! The thesis's own scenarios (Roohitavaf, "Consistency for Distributed
//! Data Stores", §7 and §7.3), step by step: partitions A and B with copies
//! A1, B1 in DC 0 and A2, B2 in DC 1, organised as 2×2 (two full replicas)
//! or 4×1 (four partial replicas).

use super::*;
use crate::kit::testkit::{Dest, InFlight, TestNet, bytes, channel, get, put, stabilize, stabilize_holding};
use causeway_core::{
    CheckingGroupError, Client, ClientId, DcId, Key, NodeId, Op, OpError, OpResult, PartitionId, Replication,
    TopologySpec,
};

const TWO_BY_TWO: &str = r#"
tracking = { groups = [["0:0", "0:1"], ["1:0", "1:1"]] }
checking = { groups = [["0:0", "0:1"], ["1:0", "1:1"]] }
"#;
const FOUR_BY_ONE: &str = r#"
tracking = { groups = [["0:0"], ["0:1"], ["1:0"], ["1:1"]] }
checking = { groups = [["0:0"], ["0:1"], ["1:0"], ["1:1"]] }
"#;

fn config(toml: &str) -> Config {
    toml::from_str(toml).expect("a valid [protocol] table")
}

/// The §7 system: keys `a` (partition A) and `b` (partition B); servers
/// A1, B1, A2, B2; two clients per DC.
struct System {
    net: TestNet<Accf>,
    a: Key,
    b: Key,
    a1: NodeId,
    b1: NodeId,
    a2: NodeId,
    b2: NodeId,
}

fn system(cfg: Config) -> System {
    let net = TestNet::<Accf>::new(2, 2, 2, cfg);
    let (a, b) = (net.key_on(0), net.key_on(1));
    let at = |dc: u16, k: &Key| net.server_for(DcId(dc), k);
    let (a1, b1, a2, b2) = (at(0, &a), at(0, &b), at(1, &a), at(1, &b));
    System { a, b, a1, b1, a2, b2, net }
}

/// Every message `node` sends to another server: "delay B1" of Fig 7.2.
fn sent_by(node: NodeId) -> impl Fn(&InFlight<Msg>) -> bool {
    move |m| m.from == Dest::Node(node) && matches!(m.to, Dest::Node(_))
}

/// Rounds of timers and server traffic, the clocks moving on, holding `held`.
fn settle(net: &mut TestNet<Accf>, held: &dyn Fn(&InFlight<Msg>) -> bool) {
    for _ in 0..4 {
        net.advance_clocks(1_000);
        stabilize_holding(net, held);
    }
}

/// App1 (§7.3): C1 at A1 writes, C2 at A2 reads it. With B1 slow, 2×2
/// keeps the write invisible at A2 until B1's heartbeats reach B2 (A2
/// checks B2, which checks B1), while 4×1 shows it as soon as it arrives.
/// Neither blocks: App1's loss under 2×2 is visibility, not waiting.
fn app1(cfg: Config) -> (Option<String>, Option<String>) {
    let mut s = system(cfg);
    let (c1, c2) = (s.net.client(0, 0), s.net.client(1, 0));
    put(&mut s.net, c1, &s.a, "0");
    let slow_b1 = sent_by(s.b1);
    settle(&mut s.net, &slow_b1);
    let while_b1_slow = get(&mut s.net, c2, &s.a);
    settle(&mut s.net, &|_| false);
    let after = get(&mut s.net, c2, &s.a);
    s.net.assert_never_blocked();
    (while_b1_slow, after)
}

#[test]
fn app1_sees_the_other_clients_write_at_once_with_4x1_and_only_after_b1_with_2x2() {
    assert_eq!(app1(config(FOUR_BY_ONE)), (Some("0".into()), Some("0".into())));
    assert_eq!(app1(config(TWO_BY_TWO)), (None, Some("0".into())));
}

/// The presets name the same organisations as the explicit groups.
#[test]
fn the_presets_are_the_thesis_organisations() {
    let per_server = config("tracking = \"per_server\"\nchecking = \"per_server\"");
    let per_replica = Config::default();
    assert_eq!(app1(per_server), (Some("0".into()), Some("0".into())));
    assert_eq!(app1(per_replica), (None, Some("0".into())));
}

/// App2 (§7.3): a writer in DC 1 writes b at B2, then a at A2 (so the new a
/// depends on the new b); C3 in DC 0 reads a at A1, then b at B1, while
/// B2's messages are slow ("delay B2"). Returns what C3 read, and whether
/// its read of b had to wait for B2.
fn app2(cfg: Config) -> (Option<String>, Option<String>, bool) {
    let mut s = system(cfg);
    let (c3, writer) = (s.net.client(0, 0), s.net.client(1, 0));
    put(&mut s.net, writer, &s.b, "1");
    put(&mut s.net, writer, &s.a, "1");
    let slow_b2 = sent_by(s.b2);
    settle(&mut s.net, &slow_b2);
    let read_a = get(&mut s.net, c3, &s.a);
    s.net.invoke(c3, Op::Get { key: s.b.clone() });
    s.net.deliver_client_traffic();
    let waited = match s.net.take_result(c3) {
        Some(OpResult::Get(v)) => return (read_a, crate::kit::testkit::text(v), false),
        Some(other) => panic!("GET b answered {other:?}"),
        None => true,
    };
    // B2's messages arrive: the parked GET is answered.
    s.net.deliver_while(|m| m.from == Dest::Node(s.b2) && m.to == Dest::Node(s.b1));
    s.net.deliver_client_traffic();
    match s.net.take_result(c3) {
        Some(OpResult::Get(v)) => (read_a, crate::kit::testkit::text(v), waited),
        other => panic!("the parked GET of b answered {other:?} once B2's messages arrived"),
    }
}

#[test]
fn app2_blocks_with_4x1_and_never_with_2x2() {
    // 4×1: A1 checks only itself, so C3 reads the new a at once; B1 must
    // then wait for B2's b, which the new a depends on.
    assert_eq!(app2(config(FOUR_BY_ONE)), (Some("1".into()), Some("1".into()), true));
    // 2×2: A1 and B1 check each other: the new a stays invisible while B1
    // lacks the b it depends on, and C3 reads old values without waiting.
    assert_eq!(app2(config(TWO_BY_TWO)), (None, None, false));
}

#[test]
fn app2_with_2x2_reads_both_new_values_without_waiting_once_b2_catches_up() {
    let mut s = system(config(TWO_BY_TWO));
    let (c3, writer) = (s.net.client(0, 0), s.net.client(1, 0));
    put(&mut s.net, writer, &s.b, "1");
    put(&mut s.net, writer, &s.a, "1");
    settle(&mut s.net, &|_| false);
    assert_eq!(get(&mut s.net, c3, &s.a), Some("1".into()));
    assert_eq!(get(&mut s.net, c3, &s.b), Some("1".into()));
    s.net.assert_never_blocked();
}

/// The wait App2 shows under 4×1 is what safety rests on: the mutant that
/// skips it (and the SVV filter) returns the old b after the new a.
#[test]
fn without_the_dependency_checks_app2_reads_a_new_a_and_an_old_b() {
    let mut cfg = config(FOUR_BY_ONE);
    cfg.mutant_skip_dependency_checks = true;
    assert_eq!(app2(cfg), (Some("1".into()), None, false));
}

/// Under 4×1 a session's reads at A1 and then B1 name two checking
/// groups: the second waits at line 3 until B2's write arrives, and the
/// wait is reported as blocking, with the time it took.
#[test]
fn the_parked_get_is_counted_as_blocked() {
    let (_, _, waited) = app2(config(FOUR_BY_ONE));
    assert!(waited);
    let mut s = system(config(FOUR_BY_ONE));
    let (c3, writer) = (s.net.client(0, 0), s.net.client(1, 0));
    put(&mut s.net, writer, &s.b, "1");
    put(&mut s.net, writer, &s.a, "1");
    settle(&mut s.net, &channel(s.b2, s.b1));
    assert_eq!(get(&mut s.net, c3, &s.a), Some("1".into()));
    s.net.invoke(c3, Op::Get { key: s.b.clone() });
    s.net.deliver_client_traffic();
    assert_eq!(s.net.take_result(c3), None, "B1 has not heard from B2 yet");
    settle(&mut s.net, &|_| false);
    s.net.deliver_client_traffic();
    assert_eq!(s.net.take_result(c3), Some(OpResult::Get(Some(bytes("1")))));
    assert_eq!(s.net.blocked("get_wait").len(), 1, "one GET waited at B1");
    assert_eq!(s.net.blocked("get_wait")[0].0, s.b1);
}

/// A GET that waits longer than `get_wait_limit_us` is answered with an
/// error naming the tracking group, not left hanging.
#[test]
fn a_get_waiting_past_its_limit_is_refused_with_a_typed_error() {
    let mut cfg = config(FOUR_BY_ONE);
    cfg.get_wait_limit_us = 50_000;
    let mut s = system(cfg);
    let (c3, writer) = (s.net.client(0, 0), s.net.client(1, 0));
    put(&mut s.net, writer, &s.b, "1");
    put(&mut s.net, writer, &s.a, "1");
    let cut_b2 = sent_by(s.b2);
    settle(&mut s.net, &cut_b2);
    assert_eq!(get(&mut s.net, c3, &s.a), Some("1".into()));
    let got = s.net.run_dropping(c3, Op::Get { key: s.b.clone() }, &cut_b2);
    match got {
        Some(OpResult::Failed(OpError::Aborted(why))) => assert!(why.contains("tracking group"), "{why}"),
        other => panic!("expected a refusal after the wait limit, got {other:?}"),
    }
}

/// With GentleRain's tracking (one group for the system) a session's read
/// after its own write waits for the other DC's heartbeat: its write's
/// timestamp is all it knows of its dependencies (a false dependency, §7.1).
#[test]
fn per_system_tracking_makes_a_read_after_a_write_wait_for_the_other_dc() {
    let mut s = system(config("tracking = \"per_system\"\nchecking = \"per_replica\""));
    let c = s.net.client(0, 0);
    put(&mut s.net, c, &s.a, "x");
    s.net.invoke(c, Op::Get { key: s.b.clone() });
    s.net.deliver_client_traffic();
    assert_eq!(s.net.take_result(c), None, "B1 waits for B2 to pass the write's timestamp");
    settle(&mut s.net, &|_| false);
    s.net.deliver_client_traffic();
    assert_eq!(s.net.take_result(c), Some(OpResult::Get(None)));
    assert_eq!(get(&mut s.net, c, &s.a), Some("x".into()));
}

/// Last-writer-wins on ⟨ut, origin⟩ with the HLC past every dependency: a
/// write that read another's value is stamped above it, and both DCs end
/// on the later write.
#[test]
fn a_write_after_a_read_is_stamped_above_it_and_wins_everywhere() {
    let mut s = system(Config::default());
    let (c1, c2) = (s.net.client(0, 0), s.net.client(1, 0));
    put(&mut s.net, c1, &s.a, "first");
    settle(&mut s.net, &|_| false);
    assert_eq!(get(&mut s.net, c2, &s.a), Some("first".into()));
    put(&mut s.net, c2, &s.a, "second");
    settle(&mut s.net, &|_| false);
    let (v1, v2) = (s.net.latest(s.a1, &s.a), s.net.latest(s.a2, &s.a));
    assert_eq!((&v1.value[..], &v2.value[..]), (&b"second"[..], &b"second"[..]));
    assert!(v1.ut > v1.ds.entries().iter().filter(|e| e.1 != v1.ut).map(|e| e.1).max().unwrap_or_default());
    assert_eq!(get(&mut s.net, c1, &s.a), Some("second".into()));
}

// ------------------------------------------------------------ per-request checking groups

/// Start `c`'s GET of `k` naming checking group `cg` for this GET only
/// (Alg 7.1's `GET(k, cg)`); returns the server it went to.
fn invoke_in(net: &mut TestNet<Accf>, c: ClientId, k: &Key, cg: Option<u16>) -> NodeId {
    net.clients[c.idx()].set_checking_group(cg).expect("a group of the grouping");
    let before = net.queue.len();
    net.invoke(c, Op::Get { key: k.clone() });
    net.clients[c.idx()].set_checking_group(None).expect("none is always accepted");
    match net.queue[before..].iter().find(|m| m.from == Dest::Client(c)) {
        Some(InFlight { to: Dest::Node(n), msg: Msg::GetReq(req), .. }) => {
            assert!(cg.is_none_or(|g| g == req.cg), "the request names {}, not {cg:?}", req.cg);
            *n
        }
        other => panic!("expected a GetReq, got {other:?}"),
    }
}

/// [`invoke_in`], answered without waiting or any server traffic.
fn get_in(net: &mut TestNet<Accf>, c: ClientId, k: &Key, cg: Option<u16>) -> (Option<String>, NodeId) {
    let at = invoke_in(net, c, k, cg);
    net.deliver_client_traffic();
    match net.take_result(c) {
        Some(OpResult::Get(v)) => (crate::kit::testkit::text(v), at),
        other => panic!("GET in {cg:?} answered {other:?} without waiting"),
    }
}

/// App2's writes under `per_replica` (2×2) with B2 → B1 slow: a session
/// of DC 0 reading only in its home group never waits (lines 4–5 hide the
/// new a); the same session naming DC 1's group reads the new a there,
/// and back home takes line 6 at A1 (the new a, past SVV^0) and waits at
/// line 3 at B1 until B2's b arrives — exactly what §7.2.2 says happens
/// to a client that uses different checking groups for different reads.
#[test]
fn a_session_naming_another_group_takes_line_6_and_waits_at_line_3_where_the_home_group_never_waits() {
    let mut s = system(Config::default());
    let (c3, c4, writer) = (s.net.client(0, 0), s.net.client(0, 1), s.net.client(1, 0));
    put(&mut s.net, writer, &s.b, "1");
    put(&mut s.net, writer, &s.a, "1");
    let slow = channel(s.b2, s.b1);
    settle(&mut s.net, &slow);
    // Home group only (group 0, DC 0): the new a depends on a b that B1
    // lacks, so A1 hides it, and nothing waits.
    assert_eq!(get_in(&mut s.net, c4, &s.a, None), (None, s.a1));
    assert_eq!(get_in(&mut s.net, c4, &s.b, None), (None, s.b1));
    s.net.assert_never_blocked();
    // c3 names group 1 (DC 1's servers): A2 has everything the new a
    // depends on, and its group's SVV says so.
    assert_eq!(get_in(&mut s.net, c3, &s.a, Some(1)), (Some("1".into()), s.a2));
    // Back home: A1 has the new a (VV_1 covers DSc, no wait) but SVV^0
    // does not (B1 lacks the b): line 6, the latest version.
    assert_eq!(get_in(&mut s.net, c3, &s.a, None), (Some("1".into()), s.a1));
    s.net.assert_never_blocked();
    // B1 has not heard from B2 since the writes: line 3 waits for it.
    assert_eq!(invoke_in(&mut s.net, c3, &s.b, None), s.b1);
    s.net.deliver_client_traffic();
    assert_eq!(s.net.take_result(c3), None, "B1 waits for B2 to reach the new a's timestamp");
    settle(&mut s.net, &|_| false);
    s.net.deliver_client_traffic();
    assert_eq!(s.net.take_result(c3), Some(OpResult::Get(Some(bytes("1")))));
    let waits = s.net.blocked("get_wait");
    assert_eq!(waits.iter().map(|w| w.0).collect::<Vec<_>>(), [s.b1], "only c3's GET of b waited");
    // And c4, still only in its group, reads both new values now, unblocked.
    assert_eq!(get_in(&mut s.net, c4, &s.a, None), (Some("1".into()), s.a1));
    assert_eq!(get_in(&mut s.net, c4, &s.b, None), (Some("1".into()), s.b1));
    assert_eq!(s.net.blocked("get_wait").len(), 1);
}

/// Groups are numbered as the grouping yields them: a group that does not
/// exist is refused by name and count, changing nothing; a group none of
/// whose members stores the key fails the GET, sending nothing; a named
/// group no member of the key's DC is in sends the GET to the next DC's.
#[test]
fn a_checking_group_is_refused_when_it_does_not_exist_or_stores_no_copy_of_the_key() {
    let mut s = system(Config::default());
    let c = s.net.client(0, 0);
    let e = s.net.clients[c.idx()].set_checking_group(Some(2)).unwrap_err();
    assert_eq!(e, CheckingGroupError::OutOfRange { group: 2, groups: 2 });
    assert_eq!(e.to_string(), "checking group 2 does not exist: the checking grouping has 2 groups, 0 to 1");
    assert_eq!(get_in(&mut s.net, c, &s.a, None), (None, s.a1), "the refusal changed nothing");
    // 4×1: group 0 is A1 alone, group 3 is B2 alone.
    let mut s = system(config(FOUR_BY_ONE));
    let c = s.net.client(0, 0);
    s.net.clients[c.idx()].set_checking_group(Some(0)).unwrap();
    let sent = s.net.queue.len();
    s.net.invoke(c, Op::Get { key: s.b.clone() });
    assert_eq!(s.net.queue.len(), sent, "nothing sent");
    assert_eq!(
        s.net.take_result(c),
        Some(OpResult::Failed(OpError::CheckingGroup(CheckingGroupError::NoServer { group: 0, partition: 1 })))
    );
    assert_eq!(get_in(&mut s.net, c, &s.b, Some(3)), (None, s.b2));
    assert_eq!(get_in(&mut s.net, c, &s.a, Some(0)), (None, s.a1));
    // A protocol without checking groups refuses any, and accepts none.
    let mut cs = TestNet::<crate::causal_spartan_x::CausalSpartanX>::new(2, 2, 1, Default::default());
    let e = cs.clients[0].set_checking_group(Some(0)).unwrap_err();
    assert_eq!(e, CheckingGroupError::Unsupported { group: 0 });
    assert!(e.to_string().contains("no checking groups"), "{e}");
    assert_eq!(cs.clients[0].set_checking_group(None), Ok(()));
}

/// Both of §7's organisations in one deployment: every server is in its
/// DC's group (0, 1: 2×2) and in a group of its own (2–5: 4×1), and each
/// application picks its view per GET, "different views to different
/// applications" (Ch. 10). App1's reader, naming A2's own group, sees the
/// write while B1 is slow, as under 4×1; App2's reader, naming its DC's
/// group, never waits while B2 is slow, as under 2×2, and naming the
/// servers' own groups waits as 4×1 does.
#[test]
fn overlapping_groups_give_app1_the_4x1_view_and_app2_the_2x2_view_in_one_deployment() {
    let both = config(
        r#"
tracking = { groups = [["0:0", "0:1"], ["1:0", "1:1"]] }
checking = { groups = [["0:0", "0:1"], ["1:0", "1:1"], ["0:0"], ["0:1"], ["1:0"], ["1:1"]] }
"#,
    );
    // App1: C1 at A1 writes, C2 reads at A2 while B1 is slow.
    let app1 = |cg: Option<u16>| {
        let mut s = system(both.clone());
        let (c1, c2) = (s.net.client(0, 0), s.net.client(1, 0));
        put(&mut s.net, c1, &s.a, "0");
        let slow_b1 = sent_by(s.b1);
        settle(&mut s.net, &slow_b1);
        let read = get_in(&mut s.net, c2, &s.a, cg);
        s.net.assert_never_blocked();
        read.0
    };
    assert_eq!(app1(None), None, "A2's first group is DC 1's: 2×2's view waits for B1");
    assert_eq!(app1(Some(1)), None);
    assert_eq!(app1(Some(4)), Some("0".into()), "A2 alone: 4×1's view");
    // App2: a writer in DC 1 writes b then a; C3 reads a at A1, then b at
    // B1, while B2 is slow; `cg` gives the group of each read.
    let app2 = |cg_a: Option<u16>, cg_b: Option<u16>| {
        let mut s = system(both.clone());
        let (c3, writer) = (s.net.client(0, 0), s.net.client(1, 0));
        put(&mut s.net, writer, &s.b, "1");
        put(&mut s.net, writer, &s.a, "1");
        let slow_b2 = sent_by(s.b2);
        settle(&mut s.net, &slow_b2);
        let (read_a, at) = get_in(&mut s.net, c3, &s.a, cg_a);
        assert_eq!(at, s.a1);
        assert_eq!(invoke_in(&mut s.net, c3, &s.b, cg_b), s.b1);
        s.net.deliver_client_traffic();
        let waited = s.net.take_result(c3).is_none();
        (read_a, waited)
    };
    assert_eq!(app2(Some(0), Some(0)), (None, false), "2×2's view: the new a hidden, no wait");
    assert_eq!(app2(None, None), (None, false), "the servers' first groups are their DC's");
    assert_eq!(app2(Some(2), Some(3)), (Some("1".into()), true), "4×1's view: the new a, then a wait for b");
}

// ------------------------------------------------------------ config

fn resolve(toml: &str, spec: TopologySpec) -> Result<Groups, ConfigError> {
    let topology = causeway_core::Topology::new(spec).expect("valid topology");
    config(toml).resolve(&topology)
}

#[test]
fn groupings_parse_as_names_numbers_and_explicit_groups() {
    let c = config("tracking = 1\nchecking = \"per_system\"");
    assert_eq!((c.tracking, c.checking), (Grouping::PerKey, Grouping::PerSystem));
    let c = config(TWO_BY_TWO);
    assert!(matches!(c.tracking, Grouping::Explicit(ref g) if g.len() == 2));
    // A config written back reads the same.
    let back: Config = toml::from_str(&toml::to_string(&c).unwrap()).unwrap();
    assert_eq!(back, c);
    let presets = config("tracking = \"per_replica\"");
    assert_eq!(toml::from_str::<Config>(&toml::to_string(&presets).unwrap()).unwrap(), presets);
}

#[test]
fn bad_groupings_are_refused_naming_the_field_and_group() {
    let err = |t: &str| toml::from_str::<Config>(t).unwrap_err().to_string();
    assert!(err("tracking = \"per_rack\"").contains("per_rack"), "{}", err("tracking = \"per_rack\""));
    assert!(err("checking = 7").contains("7"));
    assert!(err("checking = { group = [] }").contains("group"));
    assert!(err("trackin = \"per_key\"").contains("trackin"));
    let full = TopologySpec::full(2, 2);
    let e = |t: &str| resolve(t, full.clone()).unwrap_err().to_string();
    assert_eq!(
        e("tracking = { groups = [[\"0:0\", \"0:1\"], [\"1:0\", \"0:1\"], [\"1:1\"]] }"),
        "protocol.tracking: server \"0:1\" is in groups 0 and 1; T puts a server in exactly one tracking group"
    );
    assert_eq!(
        e("checking = { groups = [[\"0:0\", \"0:1\", \"1:0\"]] }"),
        "protocol.checking: server \"1:1\" is in no group; every server needs at least one checking group"
    );
    assert!(e("checking = { groups = [[\"0:0\", \"0:1\", \"1:0\", \"1:1\"], []] }").contains("group 1 is empty"));
    assert!(e("checking = { groups = [[\"a1\"]] }").contains("group 0: \"a1\" is not a server name"));
    assert!(e("tracking = { groups = [[\"2:0\"]] }").contains("no server \"2:0\""));
    assert!(e("checking = { groups = [[\"0:0\", \"0:0\"]] }").contains("names server \"0:0\" twice"));
    assert!(e("heartbeat_interval_us = 0").contains("protocol.heartbeat_interval_us"));
    // Groups are numbered in 16 bits: one per server of 2 × 40 000 does not fit.
    let big = TopologySpec::full(2, 40_000);
    let e = resolve("checking = \"per_server\"", big).unwrap_err().to_string();
    assert_eq!(e, "protocol.checking: 80000 groups; at most 65535");
}

/// Overlapping checking groups are allowed (C maps a server to a set),
/// and partial replication resolves: a DC storing only some partitions.
#[test]
fn overlapping_checking_groups_and_partial_replication_resolve() {
    let g =
        resolve("checking = { groups = [[\"0:0\", \"0:1\"], [\"0:1\", \"1:0\", \"1:1\"]] }", TopologySpec::full(2, 2))
            .unwrap();
    assert_eq!(g.checking_of(NodeId(1)), &[0, 1]);
    assert_eq!(g.home_checking(NodeId(1)), Some(0));
    assert_eq!(g.members(1), &[NodeId(1), NodeId(2), NodeId(3)]);
    let mut spec = TopologySpec::full(3, 3);
    spec.replication = Replication::Partial { factor: 2 };
    let g = resolve("tracking = \"per_key\"\nchecking = \"per_server\"", spec.clone()).unwrap();
    assert_eq!(g.tracking_count(), 3);
    assert!(
        <Accf as causeway_core::Protocol>::validate(&Config::default(), &causeway_core::Topology::new(spec).unwrap())
            .is_ok()
    );
    let mut raft = TopologySpec::full(2, 2);
    raft.replicas_per_partition = 3;
    assert!(resolve("", raft).unwrap_err().to_string().contains("replicas_per_partition"));
}

/// Under partial replication a client reads a partition its DC does not
/// store at the nearest DC that does, in that server's checking group.
#[test]
fn a_partially_replicated_key_is_read_in_another_dc() {
    let mut spec = TopologySpec::full(3, 3);
    spec.replication = Replication::Partial { factor: 2 };
    let mut net = TestNet::<Accf>::with_spec(spec, 1, Config::default());
    let k = net.key_on(1); // partition 1: DCs 1 and 2
    let p = net.topology.partition_of(&k);
    assert!(!net.topology.stores(DcId(0), p) && p == PartitionId(1));
    let (c0, c1) = (ClientId(0), ClientId(1));
    put(&mut net, c1, &k, "v");
    for _ in 0..4 {
        net.advance_clocks(1_000);
        stabilize(&mut net);
    }
    assert_eq!(get(&mut net, c0, &k), Some("v".into()));
}

/// Deviation 9: a heartbeat promises its peers that nothing at or below its
/// HLC follows. A server that sent one, crashed, and came back with its
/// clock stepped back still stamps its next write above it: it resumes at
/// the journaled lease.
#[test]
fn a_restart_with_the_clock_stepped_back_stamps_above_every_heartbeat_sent() {
    let cfg = Config::default();
    let mut s = system(cfg.clone());
    s.net.advance_clocks(500_000);
    settle(&mut s.net, &|_| false);
    let promised = s.net.nodes[s.a2.idx()].server().vv[s.net.nodes[s.a1.idx()].server().tg as usize];
    assert!(promised.l >= 500_000, "A2 heard A1's heartbeats: {promised:?}");
    s.net.restart(s.a1, &cfg);
    s.net.clocks[s.a1.idx()] = 1_000; // the clock stepped back across the crash
    let c1 = s.net.client(0, 0);
    put(&mut s.net, c1, &s.a, "after");
    let v = s.net.latest(s.a1, &s.a);
    assert!(v.ut > promised, "stamped {:?}, at or below the heartbeat {promised:?}", v.ut);
}

/// Bad input from a client is refused with a typed error naming what was
/// wrong, and the server keeps serving: a checking group the server is not
/// in, a dependency set out of order or naming a group that does not exist.
#[test]
fn malformed_requests_are_refused_by_name() {
    let mut s = system(config(FOUR_BY_ONE));
    let c = s.net.client(0, 0);
    let t = |l| causeway_core::Hlc::new(l, 0);
    let requests = [
        (Msg::GetReq(Box::new(GetReq { key: s.a.clone(), cg: 2, ds: Deps::default() })), "checking group 2"),
        (
            Msg::GetReq(Box::new(GetReq { key: s.a.clone(), cg: 0, ds: Deps::single(9, t(1)) })),
            "malformed dependency set",
        ),
        (
            Msg::PutReq(Box::new(PutReq {
                key: s.a.clone(),
                value: bytes("v"),
                ds: Deps::unchecked(vec![(3, t(5)), (1, t(4))]),
            })),
            "malformed dependency set",
        ),
    ];
    for (msg, why) in requests {
        s.net.queue.push(InFlight::new(Dest::Client(c), Dest::Node(s.a1), msg));
        s.net.deliver_first(|_| true);
        match s.net.queue.pop().map(|m| m.msg) {
            Some(Msg::GetReply(Err(OpError::BadRequest(e))) | Msg::PutReply(Err(OpError::BadRequest(e)))) => {
                assert!(e.contains(why), "{e}")
            }
            other => panic!("expected a refusal naming {why:?}, got {other:?}"),
        }
    }
    put(&mut s.net, c, &s.a, "still serving");
    assert_eq!(get(&mut s.net, c, &s.a), Some("still serving".into()));
}
