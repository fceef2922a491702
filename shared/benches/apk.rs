//! APK hot paths: reading an uploaded package (every upload: the control member unpacked, the
//! data member hashed), rendering an index record, building and signing `APKINDEX.tar.gz` (every
//! snapshot) and verifying one (a group merging a proxy member).
//!
//! `cargo bench -p packyard-shared --bench apk`
#![expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use packyard_codecs::apk::index::signed_index;
use packyard_codecs::apk::index::verify_index;
use packyard_codecs::apk::package::{index_record, read_package, Limits};
use packyard_codecs::apk::signing::{parse_public_keys, ApkKey};
use packyard_codecs::apk::testing::sized_apk;

fn bench(c: &mut Criterion) {
    let pkg = sized_apk("bench", "1.0-r0", "x86_64", 4 << 20, 1).expect("fixture");
    let mut g = c.benchmark_group("apk_package");
    g.throughput(Throughput::Bytes(pkg.bytes.len() as u64));
    g.bench_function("read_package (4 MiB)", |b| {
        b.iter(|| read_package(std::hint::black_box(&pkg.bytes[..]), Limits::default()).expect("read"))
    });
    g.finish();

    let info = read_package(&pkg.bytes[..], Limits::default()).expect("read");
    let mut g = c.benchmark_group("apk_index");
    g.throughput(Throughput::Elements(1));
    g.bench_function("index_record", |b| b.iter(|| index_record(std::hint::black_box(&info), "x86_64", 4 << 20)));
    let records: String = (0..1000)
        .map(|i| {
            let mut one = info.clone();
            one.pkginfo.name = format!("pkg{i}");
            index_record(&one, "x86_64", 4 << 20) + "\n"
        })
        .collect();
    let key = ApkKey::generate(4096).expect("key");
    let file = key.file_name("bench").expect("name");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("signed_index (1000 records, RSA-4096)", |b| {
        b.iter(|| {
            signed_index("bench v3.20/main/x86_64", std::hint::black_box(&records), &key, &file, 0).expect("index")
        })
    });
    let index = signed_index("bench", &records, &key, &file, 0).expect("index");
    let keys = parse_public_keys(&key.public_pem().expect("pem")).expect("keys");
    g.bench_function("verify_index (1000 records)", |b| {
        b.iter(|| verify_index(std::hint::black_box(&index), &keys).expect("verify"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
