-- Principals all the way down (issue 29): whose input an event was, when not the
-- owner's (empty: the owner or the kernel). A guest's turn recalls only its own
-- principal's events; the owner's prompt labels a guest's words.
ALTER TABLE context_events ADD COLUMN principal TEXT NOT NULL DEFAULT '';
