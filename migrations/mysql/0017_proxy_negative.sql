-- A proxy repository keeps at most proxy.max_negative_entries remembered misses (404/410, rows
-- without a blob): the newest are found by repository and time.
CREATE INDEX proxy_cache_fetched ON proxy_cache (repository_id, fetched_at);
