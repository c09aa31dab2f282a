-- A send takes the lowest free slot of a scope. Free places all have the same expiry
-- (-infinity: made, or given back), and a send took whichever came first on disk. That is not
-- always slot order once new rows fill space freed earlier in the table: a send could hold slot 2
-- or higher, and when the operator then lowered the scope's limit to 1, slot 1 was free within it
-- and a second send took it, two in flight under a limit of 1. Taking the lowest fills a scope's
-- held places from its first slot, where a lowered limit finds them. The index of free places now ends in
-- the slot, so the lowest is still the first entry of one index range.
DROP INDEX "send_places_free_idx";--> statement-breakpoint
CREATE INDEX "send_places_free_idx" ON "send_places" USING btree ("scope","expires_at","slot");--> statement-breakpoint

CREATE OR REPLACE FUNCTION take_free_send_place(p_scope text, p_limit integer, p_now timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  found_slot integer;
  made integer;
BEGIN
  SELECT slot INTO found_slot FROM send_places
  WHERE scope = p_scope AND expires_at < p_now AND slot <= p_limit
  ORDER BY expires_at, slot LIMIT 1 FOR UPDATE SKIP LOCKED;
  IF FOUND THEN
    RETURN found_slot;
  END IF;
  SELECT coalesce(max(slot), 0) INTO made FROM send_places WHERE scope = p_scope;
  IF made < p_limit THEN
    INSERT INTO send_places (scope, slot) SELECT p_scope, n FROM generate_series(made + 1, p_limit) AS n ON CONFLICT DO NOTHING;
    SELECT slot INTO found_slot FROM send_places
    WHERE scope = p_scope AND expires_at < p_now AND slot <= p_limit
    ORDER BY expires_at, slot LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
      RETURN found_slot;
    END IF;
  END IF;
  -- Each free place is locked by another request deciding at this instant (most give it back at
  -- once, lacking a place elsewhere): wait for the first, a statement's time, and recheck it,
  -- rather than queue while places are free.
  SELECT slot INTO found_slot FROM send_places
  WHERE scope = p_scope AND expires_at < p_now AND slot <= p_limit
  ORDER BY expires_at, slot LIMIT 1 FOR UPDATE;
  RETURN found_slot;
END $$;
