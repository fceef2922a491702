//! The MD5 a publication computes for each new package: one stream at a time (the `md-5`
//! crate, and `md5lanes` alone) against eight streams in step (`md5lanes::Lanes`, how the
//! worker hashes a page's new packages).
//!
//! `cargo bench -p packyard-shared --bench md5`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use md5::Digest as _;
use packyard_codecs::md5lanes::{self, Lanes, WIDTH};

fn bench(c: &mut Criterion) {
    const LEN: usize = 1 << 20;
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
    g.bench_function("md5lanes, eight streams in step", |b| {
        b.iter(|| {
            let mut lanes = Lanes::new(WIDTH);
            for (l, s) in streams.iter().enumerate() {
                lanes.update(l, s);
            }
            lanes.hash_ready();
            (0..WIDTH).map(|l| lanes.finish(l)[0]).fold(0u8, |a, x| a ^ x)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
