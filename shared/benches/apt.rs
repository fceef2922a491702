//! APT hot paths: reading a `.deb`'s control (every upload), `Packages` stanza rendering (per
//! package, on the snapshot build's path), the group merge of a member's stanza, and signing
//! `InRelease` (every snapshot) with Ed25519 and RSA-3072.
//!
//! `cargo bench -p packyard-shared --bench apt`

use std::collections::HashSet;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use packyard_codecs::apt::deb::{read_package, Limits};
use packyard_codecs::apt::packages::{render_stanza, PoolFile};
use packyard_codecs::apt::signing::{Algorithm, Signer};
use packyard_formats::apt::group::merge_stanza;

fn bench(c: &mut Criterion) {
    let control =
        "Package: hello\nVersion: 2.10-3\nArchitecture: amd64\nMaintainer: Santiago Vila <sanvila@debian.org>\n\
        Installed-Size: 280\nDepends: libc6 (>= 2.34)\nSection: devel\nPriority: optional\n\
        Homepage: https://www.gnu.org/software/hello/\nDescription: example package based on GNU hello\n \
        The GNU hello program produces a familiar, friendly greeting.  It\n allows non-programmers to use a classic \
        computer science tool which\n would otherwise be unavailable to them.\n";
    let sha = "a".repeat(64);
    let file =
        PoolFile { filename: "pool/main/h/hello/hello_2.10-3_amd64.deb", size: 53_448, md5: &sha[..32], sha256: &sha };
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

    // A real-shaped package: control.tar.gz, then a 4 MiB uncompressed data.tar, read to its end.
    let deb = {
        let mut data = vec![0u8; 4 << 20];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i.wrapping_mul(2_654_435_761) >> 13) as u8;
        }
        let t = packyard_codecs::apt::testing::data_tar(&[("./usr/share/bench/payload", &data[..])]);
        let mut out = packyard_codecs::apt::testing::deb(control, ".gz");
        // Replace the tiny data member with the large one.
        out.truncate(out.len() - packyard_codecs::apt::testing::small_data_member().len());
        out.extend(packyard_codecs::apt::testing::ar_member("data.tar", &t));
        out
    };
    let mut g = c.benchmark_group("apt_deb");
    g.throughput(Throughput::Elements(1));
    g.bench_function("read_package (4 MiB package, control.tar.gz)", |b| {
        b.iter(|| read_package(std::hint::black_box(&deb[..]), Limits::default()).map(|c| c.package.len()))
    });
    g.finish();

    let release = format!("Origin: debs\nLabel: debs\nSuite: stable\nCodename: stable\nDate: Mon, 30 Nov 2026 03:00:00 UTC\nArchitectures: amd64\nComponents: main\nAcquire-By-Hash: yes\nSHA256:\n{}", (0..6).map(|i| format!(" {} {:>16} main/binary-amd64/Packages{i}\n", "c".repeat(64), 1234)).collect::<String>());
    let mut g = c.benchmark_group("apt_sign");
    g.sample_size(20);
    for (name, alg) in [("ed25519", Algorithm::Ed25519), ("rsa3072", Algorithm::Rsa3072)] {
        let Ok(signer) = Signer::generate_with("bench <bench@example.org>", alg) else { continue };
        g.bench_function(format!("InRelease clearsign ({name})"), |b| {
            b.iter(|| signer.clearsign(&release).map(|s| s.len()))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
