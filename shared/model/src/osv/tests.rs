use super::*;
use serde_json::json;

/// Dotted numbers, as a stand-in for an ecosystem's order.
fn dotted(a: &str, b: &str) -> Ordering {
    let n = |s: &str| s.split('.').map(|p| p.parse::<u64>().unwrap_or(0)).collect::<Vec<_>>();
    n(a).cmp(&n(b))
}

#[test]
fn cvss_base_scores_are_the_specifications() {
    for (vector, score) in [
        ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", 9.8),
        ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H", 10.0),
        ("CVSS:3.1/AV:N/AC:H/PR:N/UI:N/S:U/C:H/I:N/A:N", 5.9),
        ("CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H", 7.8),
        ("CVSS:3.0/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N", 6.1),
        ("CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:U/C:L/I:N/A:N", 4.3),
        ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N", 0.0),
    ] {
        assert_eq!(cvss3(vector), Ok(score), "{vector}");
    }
    for (vector, score) in [
        ("AV:N/AC:L/Au:N/C:P/I:P/A:P", 7.5),
        ("AV:N/AC:M/Au:N/C:N/I:P/A:N", 4.3),
        ("(AV:N/AC:L/Au:N/C:C/I:C/A:C)", 10.0),
    ] {
        assert_eq!(cvss2(vector), Ok(score), "{vector}");
    }
    assert!(cvss3("CVSS:3.1/AV:X/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H").is_err_and(|e| e.contains("AV:X")));
    assert!(cvss3("AV:N/AC:L").is_err());
}

#[test]
fn levels_come_from_the_score_the_database_or_high() -> Result<(), OsvError> {
    let base = |extra: serde_json::Value| {
        let mut r = json!({"id": "TEST-1", "modified": "2024-01-01T00:00:00Z",
            "affected": [{"package": {"ecosystem": "Go", "name": "example.com/m"},
                "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "1.2.0"}]}]}]});
        if let (Some(r), Some(e)) = (r.as_object_mut(), extra.as_object()) {
            r.extend(e.clone());
        }
        r
    };
    let a = parse(&base(
        json!({"severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}]}),
    ))?;
    assert_eq!((a.level, a.score), (Level::Critical, Some(9.8)));
    let a = parse(&base(json!({"database_specific": {"severity": "MODERATE"}})))?;
    assert_eq!((a.level, a.score), (Level::Medium, None));
    let a = parse(&base(json!({})))?;
    assert_eq!(a.level, Level::High, "neither: high");
    let a = parse(&base(
        json!({"severity": [{"type": "CVSS_V4", "score": "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N"}],
        "database_specific": {"severity": "LOW"}}),
    ))?;
    assert_eq!(a.level, Level::Low, "a CVSS 4 vector alone: the database's level");
    Ok(())
}

#[test]
fn malformed_records_name_what_is_wrong() {
    let cases = [
        (json!({"modified": "x"}), "a record without an id"),
        (json!({"id": "A-1"}), "A-1: no \"modified\" time"),
        (
            json!({"id": "A-2", "modified": "x", "affected": [{"package": {"name": "p"}}]}),
            "A-2: an affected package without an ecosystem",
        ),
        (
            json!({"id": "A-3", "modified": "x", "affected": [{"package": {"ecosystem": "Go", "name": "m"},
                "ranges": [{"type": "NUMERIC", "events": [{"introduced": "0"}]}]}]}),
            "A-3: Go/m: range type \"NUMERIC\"",
        ),
        (
            json!({"id": "A-4", "modified": "x", "affected": [{"package": {"ecosystem": "Go", "name": "m"},
                "ranges": [{"type": "SEMVER", "events": [{"fixed": "1.0.0"}]}]}]}),
            "A-4: Go/m: a SEMVER range without an introduced event",
        ),
        (
            json!({"id": "A-5", "modified": "x", "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:Q"}]}),
            "A-5: severity \"CVSS:3.1/AV:Q\"",
        ),
    ];
    for (record, want) in cases {
        let got = parse(&record).err().map(|e| e.0).unwrap_or_default();
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
}

#[test]
fn ranges_follow_osvs_evaluation() -> Result<(), OsvError> {
    let record = json!({"id": "R-1", "modified": "x", "affected": [{"package": {"ecosystem": "Go", "name": "m"},
        "ranges": [
            {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.2.0"}, {"introduced": "2.0.0"}, {"fixed": "2.0.3"}]},
            {"type": "ECOSYSTEM", "events": [{"introduced": "3.0.0"}, {"last_affected": "3.1.0"}]},
            {"type": "ECOSYSTEM", "events": [{"introduced": "5.0.0"}, {"limit": "5.2.0"}]},
            {"type": "GIT", "events": [{"introduced": "abc"}]}
        ],
        "versions": ["4.4.4"]}]});
    let a = parse(&record)?;
    let hit = &a.affected[0];
    assert_eq!(hit.ranges.len(), 3, "a GIT range is not kept");
    for (version, affected) in [
        ("0.1.0", true),
        ("1.1.9", true),
        ("1.2.0", false),
        ("1.9.0", false),
        ("2.0.0", true),
        ("2.0.2", true),
        ("2.0.3", false),
        ("3.0.0", true),
        ("3.1.0", true),
        ("3.1.1", false),
        ("4.4.4", true),
        ("4.4.5", false),
        ("5.1.0", true),
        ("5.2.0", false),
    ] {
        assert_eq!(hit.affects(version, &dotted), affected, "{version}");
    }
    Ok(())
}
