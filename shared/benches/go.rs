//! Go hot paths: checking a module zip (every publish: the central directory, then every entry
//! inflated and CRC-checked) and ordering versions for `list`/`@latest` (every projection).
//!
//! `cargo bench -p packyard-shared --bench go`
#![expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use packyard_codecs::go::testing::{module_zip, simple_module, ZipFile};
use packyard_codecs::go::version::{latest, list};
use packyard_codecs::go::zip::{check_entries, locate, parse_central, tail_len, verify_data, Limits};

fn check(zip: &[u8]) -> usize {
    let tail = &zip[zip.len() - tail_len(zip.len() as u64) as usize..];
    let (off, size, count) = locate(tail, zip.len() as u64).expect("locate");
    let entries = parse_central(&zip[off as usize..(off + size) as usize], count, off).expect("central directory");
    let (m, v) = check_entries(&entries, None, &Limits::default()).expect("entries");
    let verified = verify_data(zip, &entries, &format!("{m}@{v}/go.mod")).expect("data");
    verified.go_mod.map_or(0, |g| g.len()) + verified.h1.len()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("go_zip");
    let one_mib = simple_module("example.com/bench", "v1.0.0", "bench", 1 << 20).expect("zip");
    g.throughput(Throughput::Bytes(one_mib.len() as u64));
    g.bench_function("check (1 MiB payload, stored)", |b| b.iter(|| check(std::hint::black_box(&one_mib))));
    let files: Vec<ZipFile> = (0..500)
        .map(|i| {
            ZipFile::new(
                &format!("pkg{}/file{i}.go", i % 20),
                format!("package pkg\n\n// File {i}.\nvar X{i} = {i}\n").repeat(20).as_bytes(),
            )
        })
        .chain(std::iter::once(ZipFile::new("go.mod", b"module example.com/many\n")))
        .collect();
    let many = module_zip("example.com/many", "v1.0.0", &files).expect("zip");
    g.throughput(Throughput::Elements(files.len() as u64));
    g.bench_function("check (500 deflated files)", |b| b.iter(|| check(std::hint::black_box(&many))));
    g.finish();

    let versions: Vec<String> = (0..1000).map(|i| format!("v1.{}.{}", i / 10, i % 10)).collect();
    let mut g = c.benchmark_group("go_versions");
    g.throughput(Throughput::Elements(versions.len() as u64));
    g.bench_function("list (1000 versions)", |b| b.iter(|| list(versions.iter().map(String::as_str))));
    g.bench_function("latest (1000 versions)", |b| b.iter(|| latest(versions.iter().map(String::as_str))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
