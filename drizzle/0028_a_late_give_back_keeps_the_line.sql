-- A give-back of an attempt whose places had lapsed and been taken by other deliveries (its
-- worker cut off from the database and from Temporal past the hold, its activity retried
-- meanwhile) no longer removes the delivery's place in line, which is the later attempt's: that
-- attempt was left waiting for a wake nobody would send, until its own recheck (up to 15
-- minutes at the back of a long line). Nor does it wake anyone, having freed nothing. The rest
-- is migration 0027's.
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
  -- An attempt's give-back that found none of its places left (they lapsed and were taken, its
  -- worker cut off past their hold) frees nothing and wakes nobody, and leaves the delivery's
  -- place in line alone: that is a later attempt's, waiting for its turn.
  IF p_attempt IS NOT NULL AND freed = 0 THEN
    RETURN '{}';
  END IF;
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
