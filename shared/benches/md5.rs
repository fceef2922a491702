//! The MD5 a publication computes for each new package: one stream at a time (the `md-5`
//! crate, and `md5lanes` alone) against eight streams in step (`md5lanes::Lanes`, fed 1 MiB
//! pieces as the worker feeds it a page's new packages).
//!
//! `cargo bench -p packyard-shared --bench md5`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use md5::Digest as _;
use packyard_codecs::md5lanes::{self, Lanes, WIDTH};

fn bench(c: &mut Criterion) {
    // Eight 4 MiB packages, read in the file store's 1 MiB pieces, as the worker hashes a page.
    const LEN: usize = 4 << 20;
    const PIECE: usize = 1 << 20;
    let streams: Vec<Vec<u8>> =
        (0..WIDTH).map(|s| (0..LEN).map(|i| (i.wrapping_mul(2_654_435_761) ^ s) as u8).collect()).collect();
    let mut g = c.benchmark_group("md5");
    g.throughput(Throughput::Bytes((WIDTH * LEN) as u64));
    g.bench_function("md-5 crate, one stream at a time", |b| {
        b.iter(|| streams.iter().map(|s| md5::Md5::digest(s)[0]).fold(0u8, |a, x| a ^ x))
    });
    g.bench_function("md5lanes, one stream at a time", |b| {
        b.iter(|| streams.iter().map(|s| md5lanes::digest(s)[0]).fold(0u8, |a, x| a ^ x))
    });
    // The lanes are kept from one page to the next, as from one package to the next in a page.
    let mut lanes = Lanes::new(WIDTH);
    g.bench_function("md5lanes, eight streams in step", |b| {
        b.iter(|| {
            for at in (0..LEN).step_by(PIECE) {
                for (l, s) in streams.iter().enumerate() {
                    lanes.update(l, &s[at..at + PIECE]);
                }
                lanes.hash_ready();
            }
            (0..WIDTH).map(|l| lanes.finish(l)[0]).fold(0u8, |a, x| a ^ x)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
