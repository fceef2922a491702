//! `Packages` stanza rendering (per package, on the snapshot build's hot path) and the group
//! merge of an upstream stanza.
//!
//! `cargo bench -p packyard-shared --bench apt_stanza`

use std::collections::HashSet;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use packyard_shared::formats::apt::group::merge_stanza;
use packyard_shared::formats::apt::packages::{render_stanza, PoolFile};

fn bench(c: &mut Criterion) {
    let control =
        "Package: hello\nVersion: 2.10-3\nArchitecture: amd64\nMaintainer: Santiago Vila <sanvila@debian.org>\n\
        Installed-Size: 280\nDepends: libc6 (>= 2.34)\nSection: devel\nPriority: optional\n\
        Homepage: https://www.gnu.org/software/hello/\nDescription: example package based on GNU hello\n \
        The GNU hello program produces a familiar, friendly greeting.  It\n allows non-programmers to use a classic \
        computer science tool which\n would otherwise be unavailable to them.\n";
    let sha = "a".repeat(64);
    let sha512 = "b".repeat(128);
    let file = PoolFile {
        filename: "pool/main/h/hello/hello_2.10-3_amd64.deb",
        size: 53_448,
        md5: &sha[..32],
        sha1: &sha[..40],
        sha256: &sha,
        sha512: &sha512,
    };
    let mut g = c.benchmark_group("apt_stanza");
    g.throughput(Throughput::Elements(1));
    let mut out = String::with_capacity(1 << 20);
    g.bench_function("render", |b| {
        b.iter(|| {
            if out.len() > (1 << 20) - 2048 {
                out.clear();
            }
            render_stanza(&mut out, std::hint::black_box(control), &file);
        })
    });
    let mut stanza = String::new();
    render_stanza(&mut stanza, control, &file);
    let stanza = stanza.trim_end().to_string() + "\n";
    g.bench_function("group_merge", |b| {
        let mut seen = HashSet::new();
        b.iter(|| {
            if out.len() > (1 << 20) - 2048 {
                out.clear();
            }
            seen.clear();
            merge_stanza(&mut out, &mut seen, "upstream", std::hint::black_box(&stanza))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
