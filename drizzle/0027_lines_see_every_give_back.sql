-- A delivery that found a scope full could join its line while a give-back of one of that scope's
-- places had not committed yet: its request did not see the place freed, and the give-back,
-- looking for whom to wake, did not see the delivery in line. The delivery then waited for its
-- own recheck (30 s at the head of a line) beside a free place. On PostgreSQL a busy webhook with
-- a fast endpoint met this now and then. (PGlite runs one call at a time and never showed it.)
--
-- Now both take a lock of the scope's line, a transaction-scoped advisory lock. A give-back takes
-- it shared, for each scope it gives back to or wakes in, before it locks anything else. A
-- request that finds a scope full takes it alone and looks again. A give-back that had begun has
-- committed by then, and the second look sees its place; one that begins later waits for the
-- request to end and finds it in line. A give-back commits within milliseconds, but one may wait
-- for a place's lock that the request holds (a request of its own delivery, or one that passed
-- that place over): so the request only tries the lock, for half a second at most, and past that
-- joins the line as before, its recheck the way out.

CREATE FUNCTION send_line_lock_key(p_scope text) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT hashtextextended('send-line:' || p_scope, 0)
$$;
--> statement-breakpoint

CREATE FUNCTION join_send_line(p_scope text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  give_up_at constant timestamptz := clock_timestamp() + interval '500 milliseconds';
BEGIN
  LOOP
    IF pg_try_advisory_xact_lock(send_line_lock_key(p_scope)) THEN
      RETURN true;
    END IF;
    IF clock_timestamp() > give_up_at THEN
      RETURN false;
    END IF;
    PERFORM pg_sleep(0.002);
  END LOOP;
END $$;
--> statement-breakpoint

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
  -- rather than queue while places are free. None: the caller joins the line. With the line's
  -- lock, a give-back under way has committed and one to come will see this delivery in line, so
  -- a second look sees what the first missed.
  FOR look IN 1..2 LOOP
    SELECT slot INTO found_slot FROM send_places
    WHERE scope = p_scope AND expires_at < p_now AND slot <= p_limit
    ORDER BY expires_at, slot LIMIT 1 FOR UPDATE;
    EXIT WHEN FOUND OR look = 2 OR NOT join_send_line(p_scope);
  END LOOP;
  RETURN found_slot;
END $$;
--> statement-breakpoint

CREATE OR REPLACE FUNCTION release_send_places(p_delivery text, p_attempt text, p_reserve_ms integer, p_keep_ms integer DEFAULT NULL) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  now_at timestamptz;
  freed integer;
  hook record;
  line record;
  line_open boolean;
  woken text[];
BEGIN
  SELECT w.id, w.project_id, w.destination, w.circuit_opened_at INTO hook
  FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
  WHERE d.id = p_delivery;
  -- The lines of the scopes it gives back to or wakes in, shared, before any place is locked.
  FOR line IN
    SELECT p.scope FROM send_places p WHERE p.delivery_id = p_delivery AND p.attempt IS NOT DISTINCT FROM p_attempt
    UNION
    SELECT unnest(ARRAY['w:' || hook.id, 'p:' || hook.project_id, 'd:' || hook.destination]) WHERE hook.id IS NOT NULL
    ORDER BY 1
  LOOP
    PERFORM pg_advisory_xact_lock_shared(send_line_lock_key(line.scope));
  END LOOP;
  PERFORM 1 FROM send_places p
  WHERE p.delivery_id = p_delivery AND p.attempt IS NOT DISTINCT FROM p_attempt
  ORDER BY send_place_order(p.scope), p.scope, p.slot FOR UPDATE;
  -- Taken once the locks are had: a wait for them does not shorten what is kept.
  now_at := clock_timestamp();
  IF p_keep_ms IS NOT NULL THEN
    UPDATE send_places SET attempt = NULL, not_before = now_at + make_interval(secs => p_keep_ms / 1000.0),
      expires_at = now_at + make_interval(secs => (p_keep_ms + p_reserve_ms) / 1000.0)
    WHERE delivery_id = p_delivery AND attempt = p_attempt;
    IF FOUND THEN
      RETURN '{}';
    END IF;
  END IF;
  WITH given_back AS (
    UPDATE send_places SET delivery_id = NULL, attempt = NULL, expires_at = '-infinity', not_before = NULL
    WHERE delivery_id = p_delivery AND attempt IS NOT DISTINCT FROM p_attempt
    RETURNING 1
  )
  SELECT count(*) INTO freed FROM given_back;
  DELETE FROM send_waiters WHERE delivery_id = p_delivery;
  IF hook.id IS NULL THEN
    RETURN '{}';
  END IF;
  -- A delivery that only waited gave back no place, but may have stood at the head of its line.
  -- While the webhook's breaker is open, its line is woken only when its one place is free.
  line_open := hook.circuit_opened_at IS NULL
    OR EXISTS (SELECT 1 FROM send_places WHERE scope = 'w:' || hook.id AND slot = 1 AND expires_at < now_at);
  woken := wake_send_waiters(
    CASE WHEN line_open THEN hook.id END,
    CASE WHEN freed > 0 THEN hook.project_id END,
    CASE WHEN freed > 0 THEN hook.destination END,
    p_reserve_ms, now_at);
  -- When the turn went to another webhook's delivery (it had waited longer for the project's or
  -- the destination's places), this webhook holds no place any more and its head still waits for
  -- one of the webhook's, that head is woken too: it now waits for the project's or the
  -- destination's and must say so there, or no later release would find it.
  IF line_open AND NOT EXISTS (SELECT 1 FROM send_waiters WHERE delivery_id = ANY (woken) AND webhook_id = hook.id)
     AND NOT EXISTS (SELECT 1 FROM send_places WHERE scope = 'w:' || hook.id AND delivery_id IS NOT NULL)
     AND (SELECT o.blocked FROM send_waiters o WHERE o.webhook_id = hook.id ORDER BY o.seq LIMIT 1) = 'webhook' THEN
    woken := woken || wake_send_waiters(hook.id, NULL, NULL, p_reserve_ms, now_at);
  END IF;
  RETURN woken;
END $$;
