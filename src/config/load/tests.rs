//! Unit tests of `load`.

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, &|k| (k == "TOKEN").then(|| "s3cret".to_string()))
}

#[test]
fn the_task_store_defaults_to_a_file_beside_the_config_and_to_memory_without_one() {
    let up = "[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n";
    let env = |_: &str| None;
    assert_eq!(parse(up).unwrap().tasks.store, StoreKind::Memory);
    let at = |text: &str| Config::parse_at(text, &env, Some(Path::new("/etc/tg")));
    assert_eq!(at(up).unwrap().tasks.store, StoreKind::File("/etc/tg/taskgate-data".into()));
    let rel = format!("[tasks]\npath = \"data\"\n{up}");
    assert_eq!(at(&rel).unwrap().tasks.store, StoreKind::File("/etc/tg/data".into()));
    let abs = format!("[tasks]\nstore = \"file\"\npath = \"/var/tg\"\n{up}");
    assert_eq!(parse(&abs).unwrap().tasks.store, StoreKind::File("/var/tg".into()));
    let mem = format!("[tasks]\nstore = \"memory\"\n{up}");
    assert_eq!(at(&mem).unwrap().tasks.store, StoreKind::Memory);
    // Whether the config chose it (`taskgate stdio` keeps a defaulted store in memory).
    assert!(!at(up).unwrap().tasks.store_chosen);
    assert!(!at(&format!("[tasks]\nmax_tasks = 5\n{up}")).unwrap().tasks.store_chosen);
    assert!(at(&rel).unwrap().tasks.store_chosen && at(&mem).unwrap().tasks.store_chosen);
    for (text, key) in [
        (format!("[tasks]\nstore = \"file\"\n{up}"), "tasks.path"),
        (format!("[tasks]\nstore = \"redis\"\n{up}"), "tasks.redis_url"),
        (format!("[tasks]\nstore = \"memory\"\npath = \"x\"\n{up}"), "tasks.path"),
    ] {
        let e = parse(&text).unwrap_err();
        assert!(e.0.starts_with(key), "{key}: {e}");
    }
}

#[test]
fn the_shipped_config_is_valid() {
    let c = parse(include_str!("../../../config.toml")).unwrap();
    assert!(c.upstream("demo").is_some());
    assert!(c.server.listen.ip().is_loopback());
}

#[test]
fn defaults_are_bounded_and_local() {
    let c = parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\n").unwrap();
    assert!(c.server.listen.ip().is_loopback());
    assert!(c.server.max_sessions > 0 && c.server.event_buffer > 0 && c.server.max_body_bytes > 0);
    assert!(!c.upstreams[0].share, "a link per session unless told otherwise");
    let c = parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\nshare = true\n").unwrap();
    assert!(c.upstreams[0].share);
    assert!(parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\nshare = \"yes\"\n").is_err());
    assert_eq!(c.upstreams[0].era, Era::Auto, "probe, then fall back, unless told otherwise");
    let c = parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\nera = \"legacy\"\n").unwrap();
    assert_eq!(c.upstreams[0].era, Era::Legacy);
    let e = parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\nera = \"new\"\n").unwrap_err();
    assert!(e.to_string().contains("upstream \"d\".era"), "{e}");
    let c = parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\n").unwrap();
    assert_eq!(c.upstreams[0].probe_timeout, DEFAULT_PROBE_TIMEOUT);
    let c = parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\nconnect_timeout = \"1s\"\n").unwrap();
    assert_eq!(c.upstreams[0].probe_timeout, Duration::from_millis(500), "half of connect_timeout when shorter");
    let c = parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\nprobe_timeout = \"300ms\"\n").unwrap();
    assert_eq!(c.upstreams[0].probe_timeout, Duration::from_millis(300));
    for bad in ["0s", "6s", "soon"] {
        let e =
            parse(&format!("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\nprobe_timeout = \"{bad}\"\n")).unwrap_err();
        assert!(e.to_string().contains("upstream \"d\".probe_timeout"), "{e}");
    }
}

#[test]
fn errors_name_the_key() {
    let cases = [
        ("[server]\nlisten = \"nope\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.listen"),
        ("[server]\nmax_sessions = 0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.max_sessions"),
        (
            "[server]\nsession_idle_timeout = \"soon\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"",
            "server.session_idle_timeout",
        ),
        ("[[upstream]]\nbuiltin=\"demo\"", "upstream[0].name"),
        ("[[upstream]]\nname=\"a b\"\nbuiltin=\"demo\"", "upstream[0].name"),
        ("[[upstream]]\nname=\"a\"\ncommand=\"x\"\nurl=\"http://h/\"", "exactly one"),
        ("[[upstream]]\nname=\"a\"", "exactly one"),
        ("[[upstream]]\nname=\"a\"\nurl=\"ftp://h/\"", "upstream \"a\".url"),
        ("[[upstream]]\nname=\"a\"\nbuiltin=\"other\"", "upstream \"a\".builtin"),
        ("[[upstream]]\nname=\"a\"\nurl=\"http://h/\"\nargs=[\"x\"]", "upstream \"a\".args"),
        ("[[upstream]]\nname=\"a\"\nurl=\"http://h/\"\ntransport=\"websocket\"", "upstream \"a\".transport"),
        ("[[upstream]]\nname=\"a\"\ncommand=\"x\"\ntransport=\"sse\"", "upstream \"a\".transport"),
        ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\ntransport=\"auto\"", "upstream \"a\".transport"),
        ("[[upstream]]\nname=\"a\"\ncommand=\"x\"\nenv={K=\"${MISSING}\"}", "MISSING is not set"),
        ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "more than one"),
        ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\nbogus=1", "bogus"),
        ("", "no [[upstream]]"),
        (
            "[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n[upstream.tasks]\nhosted=\"sometimes\"",
            "upstream \"a\".tasks.hosted",
        ),
        ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n[upstream.tasks]\nttl=\"2h\"", "upstream \"a\".tasks.ttl"),
        (
            "[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n[upstream.tasks]\nrequired=\"maybe\"",
            "upstream \"a\".tasks.required",
        ),
        ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\nrequest_timeout=\"0s\"", "upstream \"a\".request_timeout"),
        ("[tasks]\nmax_tasks=0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "tasks.max_tasks"),
        ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\nmax_request_time=\"9000000h\"", "max_request_time"),
        ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\nmax_input_rounds=0", "upstream \"a\".max_input_rounds"),
        ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\nmax_input_requests=2000", "upstream \"a\".max_input_requests"),
        ("[server]\nmax_batch = 0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.max_batch"),
        ("[server]\nevent_buffer_bytes = 0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.event_buffer_bytes"),
        ("[server]\nmax_connections = 0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.max_connections"),
        (
            "[server]\nmax_connections = 99999999999\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"",
            "server.max_connections",
        ),
        (
            "[server]\nheader_read_timeout = \"0s\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"",
            "server.header_read_timeout",
        ),
        ("[server]\nbody_read_timeout = \"x\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.body_read_timeout"),
        ("[server]\ndrain_timeout = \"0ms\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.drain_timeout"),
        ("[server]\ndrain_timeout = \"25h\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.drain_timeout"),
        ("[server]\nevent_buffer_bytes = 0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.event_buffer_bytes"),
    ];
    for (text, want) in cases {
        let e = parse(text).err().unwrap_or_else(|| panic!("accepted: {text}"));
        assert!(e.0.contains(want), "error {:?} should mention {want:?}", e.0);
    }
}

#[test]
fn an_http_upstream_is_auto_detected_unless_its_transport_is_named() {
    let mode = |extra: &str| {
        let c = parse(&format!("[[upstream]]\nname=\"a\"\nurl=\"http://h/sse\"\n{extra}")).unwrap();
        let Transport::Http { mode, .. } = c.upstreams[0].transport else { panic!() };
        (mode, c.describe())
    };
    assert_eq!(mode("").0, HttpMode::Auto);
    assert_eq!(mode("transport=\"auto\"").0, HttpMode::Auto);
    assert_eq!(mode("transport=\"streamable-http\"").0, HttpMode::StreamableHttp);
    let (sse, shown) = mode("transport=\"sse\"");
    assert_eq!(sse, HttpMode::Sse);
    assert!(shown.contains("transport = \"sse\""), "{shown}");
    let e = parse("[[upstream]]\nname=\"a\"\nurl=\"http://h/\"\ntransport=\"SSE\"").unwrap_err();
    assert_eq!(e.0, "upstream \"a\".transport: \"SSE\" is not one of \"auto\", \"streamable-http\" or \"sse\"");
}

#[test]
fn env_references_expand_and_are_redacted() {
    let c =
        parse("[[upstream]]\nname=\"a\"\nurl=\"https://h/mcp\"\nheaders={Authorization=\"Bearer ${TOKEN}\"}").unwrap();
    let Transport::Http { headers, .. } = &c.upstreams[0].transport else { panic!() };
    assert_eq!(headers[0].1.value, "Bearer s3cret");
    let shown = c.describe();
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("<from environment>"));
}

#[test]
fn dialects_are_off_unless_enabled() {
    let c = parse("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"").unwrap();
    assert_eq!(c.upstreams[0].dialects, Dialects::default());
    assert!(!c.upstreams[0].dialects.progress_get && !c.upstreams[0].dialects.sep1391);
    let on = "[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n[upstream.dialects]\nprogress_get=true\nsep1391=true\nretention=\"2m\"";
    let c = parse(on).unwrap();
    let d = &c.upstreams[0].dialects;
    assert!(d.progress_get && d.sep1391);
    assert_eq!(d.retention, Duration::from_secs(120));
    assert!(c.describe().contains("[upstream.dialects]\nprogress_get = true\nsep1391 = true\nretention = \"2m\""));
    for (bad, want) in [
        ("retention=\"0s\"", "upstream \"a\".dialects.retention"),
        ("retention=\"48h\"", "upstream \"a\".dialects.retention"),
        ("progress_get=1", "progress_get"),
        ("sep=true", "sep"),
    ] {
        let e = parse(&format!("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n[upstream.dialects]\n{bad}")).unwrap_err();
        assert!(e.0.contains(want), "{bad}: {}", e.0);
    }
}

#[test]
fn durations() {
    assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
    assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
    assert_eq!(parse_duration("5"), None);
    assert_eq!(fmt_duration(Duration::from_secs(1800)), "30m");
}
