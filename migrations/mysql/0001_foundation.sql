CREATE TABLE users (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    username VARCHAR(255) NOT NULL UNIQUE,
    password_hash VARCHAR(255) NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE repositories (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARCHAR(64) NOT NULL UNIQUE,
    format VARCHAR(16) NOT NULL,
    kind VARCHAR(16) NOT NULL,
    settings MEDIUMTEXT NOT NULL,
    write_policy VARCHAR(16) NOT NULL,
    anonymous_read SMALLINT NOT NULL,
    version BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE group_members (
    group_id BIGINT NOT NULL,
    member_id BIGINT NOT NULL,
    position INT NOT NULL,
    PRIMARY KEY (group_id, position),
    KEY group_members_member (member_id),
    CONSTRAINT group_members_group FOREIGN KEY (group_id) REFERENCES repositories (id) ON DELETE CASCADE,
    CONSTRAINT group_members_member_fk FOREIGN KEY (member_id) REFERENCES repositories (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE blobs (
    sha256 CHAR(64) NOT NULL PRIMARY KEY,
    size BIGINT NOT NULL,
    created_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;
