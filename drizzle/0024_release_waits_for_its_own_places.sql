-- A give-back waits for a lock on its own places. It passed over any of them another call had
-- locked at that instant (FOR UPDATE SKIP LOCKED), so that a lapsed hold another request was
-- taking stayed that request's. But on PostgreSQL a waiter's locking read that waited for a free
-- place, found it just taken and passed it over keeps its lock on that place until its own call
-- ends: the give-back that met such a lock freed nothing, and the place stayed held until its
-- hold lapsed (a minute). Behind an open circuit breaker, whose webhook has one place, its line
-- stood still that long. (PGlite runs one call at a time and never showed it.)
--
-- Now a give-back locks its attempt's places and waits for a call that holds one. A place a
-- request took meanwhile (a lapsed hold) is no longer the delivery's once that lock is had, and
-- is left alone. The places are locked in the order a request takes them (webhook, project,
-- destination; send_place_order), as a new rate limit's move of the waiting sends' starts now
-- locks them too, so none of these calls waits for another that waits for it.

CREATE FUNCTION send_place_order(p_scope text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE left(p_scope, 2) WHEN 'w:' THEN 1 WHEN 'p:' THEN 2 ELSE 3 END
$$;
--> statement-breakpoint

CREATE OR REPLACE FUNCTION release_send_places(p_delivery text, p_attempt text, p_reserve_ms integer, p_keep_ms integer DEFAULT NULL) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  now_at timestamptz;
  freed integer;
  hook record;
  line_open boolean;
  woken text[];
BEGIN
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
  SELECT w.id, w.project_id, w.destination, w.circuit_opened_at INTO hook
  FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
  WHERE d.id = p_delivery;
  IF NOT FOUND THEN
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
