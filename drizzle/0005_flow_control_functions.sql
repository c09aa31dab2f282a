-- Flow control of the sends to one customer endpoint (src/flow-control/). A delivery's attempt
-- may start only while it holds one of its webhook's places: ENDPOINT_MAX_IN_FLIGHT of them, or
-- one while the webhook's circuit breaker is open. A delivery that finds no free place waits,
-- first come first served, and is woken when one frees. Every function below first locks the
-- webhook's row, so the acquires and releases of one endpoint run one at a time and each sees
-- the rows of the others; one call is one round trip. Times are the database's, so every
-- replica reads the same clock.

-- Gives free places to the oldest waiters of a webhook; returns the deliveries promoted (their
-- workflows are then woken). A promoted waiter's place is reserved for `p_reserve_ms`.
CREATE FUNCTION promote_send_waiters(p_webhook text, p_limit integer, p_reserve_ms integer) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  free integer;
  promoted text[];
BEGIN
  SELECT greatest(p_limit - count(*), 0) INTO free FROM send_permits WHERE webhook_id = p_webhook AND state = 'held';
  IF free = 0 THEN
    RETURN '{}';
  END IF;
  WITH next AS (
    SELECT delivery_id FROM send_permits
    WHERE webhook_id = p_webhook AND state = 'waiting'
    ORDER BY queued_at, delivery_id
    LIMIT free
  ), changed AS (
    UPDATE send_permits AS permit
    SET state = 'held', expires_at = statement_timestamp() + make_interval(secs => p_reserve_ms / 1000.0)
    FROM next WHERE permit.delivery_id = next.delivery_id
    RETURNING permit.delivery_id
  )
  SELECT coalesce(array_agg(delivery_id), '{}') INTO promoted FROM changed;
  RETURN promoted;
END $$;
--> statement-breakpoint

-- Asks for a place for the next attempt of a delivery. Answers one of:
--   granted     the attempt may start now (its place is held for `p_hold_ms`);
--   wait_turn   no place is free: the delivery waits in line (`ahead` others before it) and is
--               woken when one frees;
--   wait_until  a place is held but the webhook's rate limit lets the send start only in
--               `wait_ms` milliseconds (that start time is reserved for it);
-- and `wake`: other deliveries given a place by this call (holds that lapsed were freed).
-- A delivery that is gone, or whose webhook is disabled, is granted without a place: its
-- attempt ends at once without sending.
CREATE FUNCTION acquire_send_permit(p_delivery text, p_max_in_flight integer, p_hold_ms integer, p_reserve_ms integer)
RETURNS TABLE (decision text, wait_ms integer, ahead integer, wake text[])
LANGUAGE plpgsql AS $$
DECLARE
  hook record;
  mine send_permits%ROWTYPE;
  woken text[];
  start_at timestamptz;
BEGIN
  SELECT w.id, w.status, w.rate_limit, w.rate_next_at, w.circuit_opened_at INTO hook
  FROM webhooks w
  WHERE w.id = (SELECT d.webhook_id FROM deliveries d WHERE d.id = p_delivery)
  FOR UPDATE;
  IF NOT FOUND OR hook.status <> 'active' THEN
    RETURN QUERY SELECT 'granted'::text, 0, 0, '{}'::text[];
    RETURN;
  END IF;

  -- A hold past its time belongs to an attempt whose worker died: its place is free again.
  DELETE FROM send_permits WHERE webhook_id = hook.id AND state = 'held' AND expires_at < statement_timestamp();
  INSERT INTO send_permits (delivery_id, webhook_id, state, queued_at)
  VALUES (p_delivery, hook.id, 'waiting', statement_timestamp())
  ON CONFLICT (delivery_id) DO NOTHING;
  woken := promote_send_waiters(hook.id, CASE WHEN hook.circuit_opened_at IS NULL THEN p_max_in_flight ELSE 1 END, p_reserve_ms);
  SELECT * INTO mine FROM send_permits WHERE delivery_id = p_delivery;
  IF mine.state = 'waiting' THEN
    RETURN QUERY SELECT 'wait_turn'::text, 0,
      (SELECT count(*)::integer FROM send_permits
       WHERE webhook_id = hook.id AND state = 'waiting' AND (queued_at, delivery_id) < (mine.queued_at, mine.delivery_id)),
      woken;
    RETURN;
  END IF;
  woken := array_remove(woken, p_delivery);

  -- The rate limit: each send is given its own start time, 1 / rate_limit seconds after the
  -- previous one, so deliveries waiting for it wake one at a time.
  IF hook.rate_limit IS NOT NULL AND mine.not_before IS NULL THEN
    start_at := greatest(statement_timestamp(), coalesce(hook.rate_next_at, statement_timestamp()));
    UPDATE webhooks SET rate_next_at = start_at + make_interval(secs => 1.0 / hook.rate_limit) WHERE id = hook.id;
    mine.not_before := start_at;
  END IF;
  IF mine.not_before IS NOT NULL AND mine.not_before > statement_timestamp() THEN
    UPDATE send_permits
    SET not_before = mine.not_before, expires_at = mine.not_before + make_interval(secs => p_reserve_ms / 1000.0)
    WHERE delivery_id = p_delivery;
    RETURN QUERY SELECT 'wait_until'::text, ceil(extract(epoch FROM mine.not_before - statement_timestamp()) * 1000)::integer, 0, woken;
    RETURN;
  END IF;
  UPDATE send_permits
  SET not_before = NULL, expires_at = statement_timestamp() + make_interval(secs => p_hold_ms / 1000.0)
  WHERE delivery_id = p_delivery;
  RETURN QUERY SELECT 'granted'::text, 0, 0, woken;
END $$;
--> statement-breakpoint

-- Gives back a delivery's place (its attempt ended, or it no longer waits), frees the places of
-- holds that lapsed, and passes free places to the oldest waiters; returns the deliveries to wake.
CREATE FUNCTION release_send_permit(p_delivery text, p_max_in_flight integer, p_reserve_ms integer) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  hook record;
BEGIN
  SELECT w.id, w.circuit_opened_at INTO hook
  FROM webhooks w
  WHERE w.id = (SELECT p.webhook_id FROM send_permits p WHERE p.delivery_id = p_delivery)
  FOR UPDATE;
  IF NOT FOUND THEN
    RETURN '{}';
  END IF;
  DELETE FROM send_permits
  WHERE delivery_id = p_delivery OR (webhook_id = hook.id AND state = 'held' AND expires_at < statement_timestamp());
  RETURN promote_send_waiters(hook.id, CASE WHEN hook.circuit_opened_at IS NULL THEN p_max_in_flight ELSE 1 END, p_reserve_ms);
END $$;
