-- Every asset's SHA-1 and MD5 (Nexus's checksums), computed by the worker from the blob when
-- the format does not give them: the worker finds the assets still without by this index, and
-- searches by SHA-1 and MD5 use it and the next.
CREATE INDEX assets_sha1 ON assets (sha1);
CREATE INDEX assets_md5 ON assets (md5);
