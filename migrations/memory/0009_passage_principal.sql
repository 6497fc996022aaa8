-- A guest's words stay a guest's words once archived (issue 29): the passage keeps
-- the principal of the event it was (empty: the owner or the kernel), so the owner's
-- prompt quotes it as data instead of reading it as its own memory.
ALTER TABLE passages ADD COLUMN principal TEXT NOT NULL DEFAULT '';
