-- OSV advisories (`packyard-api vulnerabilities import`): one row per record, replaced whole
-- when an import brings it with another `modified` time. `level` is its severity level
-- (DESIGN §5b), `score_tenths` the CVSS base score it came from (×10), if any, `record`
-- the record as imported (what an ecosystem's own database serves, such as Go's).
CREATE TABLE advisories (
    id TEXT PRIMARY KEY,
    modified VARCHAR(64) NOT NULL,
    level VARCHAR(16) NOT NULL,
    score_tenths INTEGER,
    summary VARCHAR(1000) NOT NULL,
    aliases TEXT NOT NULL,
    record TEXT NOT NULL,
    withdrawn INTEGER NOT NULL,
    imported_at INTEGER NOT NULL
);
-- The packages each advisory affects: `ecosystem` is OSV's without its release (`Debian`
-- for `Debian:12`), `detail` the entry as JSON (its full ecosystem, ranges, versions, level).
CREATE TABLE advisory_packages (
    advisory_id TEXT NOT NULL,
    ecosystem VARCHAR(100) NOT NULL,
    name TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX advisory_packages_name ON advisory_packages (ecosystem, name);
CREATE INDEX advisory_packages_advisory ON advisory_packages (advisory_id);
