-- The dead-letter list (issue 30): an input whose turn failed for good (an LLM outage
-- longer than core.agent.outage_wait, an error) is kept with why, not deleted; the
-- owner retries or discards it (GET /api/v1/inbox/dead). `given_up_at_ms` marks it,
-- as it already marked inputs that killed the daemon three times.
ALTER TABLE inbox ADD COLUMN last_error TEXT;
