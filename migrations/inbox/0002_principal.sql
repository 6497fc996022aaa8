-- Who each stored input speaks for (a JSON `firewall::Principal`). Rows from before
-- this column have NULL and replay as guests (see inbox.rs `stored_principal`).
ALTER TABLE inbox ADD COLUMN principal TEXT;
