-- Conan recipe revisions (pkgid = prev = '') and package revisions of hosted repositories; a
-- revision is `complete` once its conanmanifest.txt arrived and matched. Files are blobs.
CREATE TABLE conan_revisions (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    reference VARCHAR(420) CHARACTER SET ascii NOT NULL,
    rrev VARCHAR(128) CHARACTER SET ascii NOT NULL,
    pkgid VARCHAR(128) CHARACTER SET ascii NOT NULL,
    prev VARCHAR(128) CHARACTER SET ascii NOT NULL,
    complete BIGINT NOT NULL,
    time_ms BIGINT NOT NULL,
    UNIQUE KEY conan_revisions_coordinate (repository_id, reference, rrev, pkgid, prev),
    CONSTRAINT conan_revisions_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE conan_files (
    revision_id BIGINT NOT NULL,
    path VARCHAR(512) NOT NULL,
    sha256 CHAR(64) CHARACTER SET ascii NOT NULL,
    size BIGINT NOT NULL,
    md5 CHAR(32) CHARACTER SET ascii NOT NULL,
    sha1 CHAR(40) CHARACTER SET ascii NOT NULL,
    PRIMARY KEY (revision_id, path),
    CONSTRAINT conan_files_revision_fk FOREIGN KEY (revision_id) REFERENCES conan_revisions (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
