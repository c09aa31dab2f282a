ALTER TABLE "send_places" ADD COLUMN "taken_at" timestamp with time zone;

--> statement-breakpoint

-- Send capacity with no wait that can close a cycle. Two requests served at one instant from the
-- same line each deleted their own row of send_waiters, then updated the other's (the next
-- head's turn time): each waited for the other, and PostgreSQL broke the deadlock by failing one,
-- which cost that delivery an attempt. Now a request touches no other delivery's row when it is
-- served: the head of a webhook's line waits its turn from the later of its own arrival and the
-- webhook's last service, the latest `taken_at` of the webhook's places. A call waits only for
-- rows it owns and for the places of a scope, taken in one order (webhook, project,
-- destination); another delivery's row of send_waiters that another call holds at that instant
-- (waking it, serving or queueing it) is passed over for the next (FOR UPDATE SKIP LOCKED), and
-- a waiter passed over that way asks again by itself (turnRecheckMs). A release passes over the
-- places of a lapsed hold that another request is taking at that instant: they are that
-- request's. And a delivery that asks again where it already waits writes nothing.

-- The limits of the three scopes of a webhook's sends, as a request for places and the repair
-- check's search for lines nobody will wake both read them: the webhook's (one while its circuit
-- breaker is open), its project's and its destination's (the operator's own, or the configured).
-- A scope may have more places made than its limit (the breaker opened, the operator lowered
-- it): those above the limit are not free for anyone.
CREATE FUNCTION send_scope_limits(
  p_circuit_open boolean, p_project text, p_destination text,
  p_webhook_max integer, p_project_max integer, p_destination_max integer) RETURNS integer[]
LANGUAGE sql STABLE AS $$
  SELECT ARRAY[
    CASE WHEN p_circuit_open THEN 1 ELSE p_webhook_max END,
    coalesce((SELECT l.max_in_flight FROM project_limits l WHERE l.project_id = p_project), p_project_max),
    coalesce((SELECT l.max_in_flight FROM destination_limits l WHERE l.destination = p_destination), p_destination_max)]
$$;
--> statement-breakpoint

CREATE OR REPLACE FUNCTION acquire_send_places(
  p_delivery text, p_attempt text,
  p_webhook_max integer, p_project_max integer, p_destination_max integer,
  p_hold_ms integer, p_reserve_ms integer, p_new_round boolean DEFAULT false)
RETURNS TABLE (decision text, wait_ms integer, wait_reason text, ahead integer, wake text[])
LANGUAGE plpgsql AS $$
DECLARE
  now_at timestamptz := statement_timestamp();
  hook record;
  held record;
  holding boolean := false;
  me send_waiters%ROWTYPE;
  woken_me boolean;
  levels constant text[] := ARRAY['webhook', 'project', 'destination'];
  scopes text[];
  limits integer[];
  slots integer[] := '{}';
  full_level integer;
  free_slot integer;
  woken text[] := '{}';
  next_id text;
  first_seq bigint;
  counted integer;
  start_at timestamptz;
BEGIN
  SELECT w.id, w.project_id, w.destination, w.status, w.rate_limit, w.circuit_opened_at INTO hook
  FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
  WHERE d.id = p_delivery;
  IF NOT FOUND OR hook.status <> 'active' THEN
    RETURN QUERY SELECT 'granted'::text, 0, NULL::text, 0, '{}'::text[];
    RETURN;
  END IF;

  SELECT p.attempt, p.expires_at, p.not_before INTO held FROM send_places p WHERE p.delivery_id = p_delivery LIMIT 1;
  IF FOUND THEN
    IF held.expires_at < now_at THEN
      UPDATE send_places SET delivery_id = NULL, attempt = NULL, expires_at = '-infinity', not_before = NULL WHERE delivery_id = p_delivery;
    ELSIF held.attempt IS NOT NULL AND held.attempt <> p_attempt THEN
      RETURN QUERY SELECT 'wait_until'::text,
        least(ceil(extract(epoch FROM held.expires_at - now_at) * 1000), 2147483647)::integer, 'attempt'::text, 0, '{}'::text[];
      RETURN;
    ELSIF held.attempt = p_attempt THEN
      -- This attempt asks again for what it holds.
      RETURN QUERY SELECT 'granted'::text, 0, NULL::text, 0, '{}'::text[];
      RETURN;
    ELSIF hook.circuit_opened_at IS NOT NULL AND EXISTS (
      SELECT 1 FROM send_places WHERE delivery_id = p_delivery AND scope = 'w:' || hook.id AND slot > 1
    ) THEN
      -- Its places were reserved for it (a rate limit's start time), but the webhook's breaker
      -- has opened since: one place is all it has now. They go back, and the delivery asks for
      -- that one like the others.
      woken := release_send_places(p_delivery, NULL, p_reserve_ms);
    ELSE
      holding := true;
    END IF;
  END IF;

  IF NOT holding THEN
    scopes := ARRAY['w:' || hook.id, 'p:' || hook.project_id, 'd:' || hook.destination];
    limits := send_scope_limits(hook.circuit_opened_at IS NOT NULL, hook.project_id, hook.destination, p_webhook_max, p_project_max, p_destination_max);
    SELECT * INTO me FROM send_waiters WHERE delivery_id = p_delivery;
    woken_me := FOUND AND coalesce(me.woken_until >= now_at, false);
    -- First come, first served within a webhook: a delivery not woken for its turn goes behind
    -- those in line before it (not counting those woken earlier that did not come back in time).
    -- The first of the line is read from the line's index, whatever its length.
    SELECT o.seq INTO first_seq FROM send_waiters o
    WHERE o.webhook_id = hook.id AND (o.woken_until IS NULL OR o.woken_until >= now_at)
    ORDER BY o.seq LIMIT 1;
    IF NOT woken_me AND first_seq < coalesce(me.seq, 9223372036854775807) THEN
      full_level := 1;
      -- The webhook's places are free while its line waits for them (a hold lapsed, or a wake
      -- signal was lost): wake the first before this delivery that is not already on its way.
      -- (One that waits for its project's or destination's places is woken when those free.)
      IF EXISTS (SELECT 1 FROM send_places WHERE scope = scopes[1] AND expires_at < now_at AND slot <= limits[1]) THEN
        SELECT o.delivery_id INTO next_id FROM send_waiters o
        WHERE o.webhook_id = hook.id AND o.seq < coalesce(me.seq, 9223372036854775807)
          AND (o.woken_until IS NULL OR o.woken_until < now_at)
        ORDER BY o.seq LIMIT 1 FOR UPDATE SKIP LOCKED;
        IF FOUND AND (SELECT blocked FROM send_waiters WHERE delivery_id = next_id) = 'webhook' THEN
          UPDATE send_waiters SET woken_until = now_at + make_interval(secs => p_reserve_ms / 1000.0) WHERE delivery_id = next_id;
          woken := woken || next_id;
        END IF;
      END IF;
    ELSE
      FOR i IN 1..3 LOOP
        free_slot := take_free_send_place(scopes[i], limits[i], now_at);
        IF free_slot IS NULL THEN
          full_level := i;
          EXIT;
        END IF;
        slots := slots || free_slot;
      END LOOP;
    END IF;

    IF full_level IS NOT NULL THEN
      -- A delivery asking again where it already waits, as it waited, writes nothing: a long
      -- line's rechecks only read.
      IF me.delivery_id IS NULL OR me.woken_until IS NOT NULL
         OR (me.webhook_id, me.project_id, me.destination, me.blocked) IS DISTINCT FROM (hook.id, hook.project_id, hook.destination, levels[full_level]) THEN
        INSERT INTO send_waiters AS w (delivery_id, webhook_id, project_id, destination, blocked, blocked_since)
        VALUES (p_delivery, hook.id, hook.project_id, hook.destination, levels[full_level], now_at)
        ON CONFLICT (delivery_id) DO UPDATE SET
          webhook_id = EXCLUDED.webhook_id,
          project_id = EXCLUDED.project_id,
          destination = EXCLUDED.destination,
          blocked = EXCLUDED.blocked,
          blocked_since = CASE WHEN w.blocked = EXCLUDED.blocked THEN w.blocked_since ELSE EXCLUDED.blocked_since END,
          woken_until = NULL
        RETURNING * INTO me;
      END IF;
      IF full_level = 1 THEN
        SELECT count(*)::integer INTO counted FROM (
          SELECT 1 FROM send_waiters o WHERE o.webhook_id = hook.id AND o.seq < me.seq ORDER BY o.seq LIMIT limits[1]) AS ahead_of_me;
      ELSIF full_level = 2 THEN
        SELECT count(*)::integer INTO counted FROM (
          SELECT 1 FROM send_waiters o WHERE o.project_id = hook.project_id AND o.blocked = 'project' AND o.blocked_since < me.blocked_since
          ORDER BY o.blocked_since LIMIT limits[2]) AS ahead_of_me;
      ELSE
        SELECT count(*)::integer INTO counted FROM (
          SELECT 1 FROM send_waiters o WHERE o.destination = hook.destination AND o.blocked = 'destination' AND o.blocked_since < me.blocked_since
          ORDER BY o.blocked_since LIMIT limits[3]) AS ahead_of_me;
      END IF;
      RETURN QUERY SELECT 'wait_turn'::text, 0, levels[full_level], counted, woken;
      RETURN;
    END IF;

    UPDATE send_places SET delivery_id = p_delivery, attempt = NULL, not_before = NULL, taken_at = now_at,
      expires_at = now_at + make_interval(secs => p_hold_ms / 1000.0)
    WHERE (scope, slot) IN ((scopes[1], slots[1]), (scopes[2], slots[2]), (scopes[3], slots[3]));
    DELETE FROM send_waiters WHERE delivery_id = p_delivery;
  END IF;

  -- The rate limit: each send is given its own start time, 1 / rate_limit seconds after the
  -- previous one's, and keeps its places reserved until then, so waiters wake one at a time.
  IF holding THEN
    -- A new round (a manual retry) does not wait out the backoff its places were kept for; a
    -- start time under a rate limit stands.
    start_at := CASE WHEN p_new_round AND hook.rate_limit IS NULL THEN now_at ELSE held.not_before END;
  ELSIF hook.rate_limit IS NOT NULL THEN
    UPDATE webhooks SET rate_next_at = greatest(now_at, coalesce(rate_next_at, now_at)) + make_interval(secs => 1.0 / rate_limit)
    WHERE id = hook.id
    RETURNING rate_next_at - make_interval(secs => 1.0 / rate_limit) INTO start_at;
  END IF;
  IF start_at > now_at THEN
    UPDATE send_places SET attempt = NULL, not_before = start_at,
      expires_at = start_at + make_interval(secs => p_reserve_ms / 1000.0)
    WHERE delivery_id = p_delivery;
    RETURN QUERY SELECT 'wait_until'::text,
      least(ceil(extract(epoch FROM start_at - now_at) * 1000), 2147483647)::integer, 'rate'::text, 0, woken;
    RETURN;
  END IF;
  UPDATE send_places SET attempt = p_attempt, not_before = NULL,
    expires_at = now_at + make_interval(secs => p_hold_ms / 1000.0)
  WHERE delivery_id = p_delivery;
  RETURN QUERY SELECT 'granted'::text, 0, NULL::text, 0, woken;
END $$;
--> statement-breakpoint

CREATE OR REPLACE FUNCTION wake_send_waiters(p_webhook text, p_project text, p_destination text, p_reserve_ms integer, p_now timestamptz) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  next_id text;
  passed text[] := '{}';
BEGIN
  -- A candidate another call holds at this instant (a release waking it, its own request serving
  -- or queueing it) is passed over for the next, not waited for; so is one a release that
  -- committed meanwhile woke. So each release wakes one of its own.
  FOR try IN 1..3 LOOP
    SELECT candidate.delivery_id INTO next_id FROM (
      (SELECT delivery_id, greatest(blocked_since, (SELECT max(p.taken_at) FROM send_places p WHERE p.scope = 'w:' || p_webhook)) AS blocked_since FROM send_waiters
       WHERE p_webhook IS NOT NULL AND webhook_id = p_webhook AND delivery_id <> ALL (passed) AND (woken_until IS NULL OR woken_until < p_now)
       ORDER BY seq LIMIT 1)
      UNION ALL
      (SELECT delivery_id, blocked_since FROM send_waiters
       WHERE p_project IS NOT NULL AND project_id = p_project AND delivery_id <> ALL (passed) AND blocked = 'project' AND (woken_until IS NULL OR woken_until < p_now)
       ORDER BY blocked_since LIMIT 1)
      UNION ALL
      (SELECT delivery_id, blocked_since FROM send_waiters
       WHERE p_destination IS NOT NULL AND destination = p_destination AND delivery_id <> ALL (passed) AND blocked = 'destination' AND (woken_until IS NULL OR woken_until < p_now)
       ORDER BY blocked_since LIMIT 1)
    ) AS candidate
    ORDER BY candidate.blocked_since LIMIT 1;
    IF next_id IS NULL THEN
      RETURN '{}';
    END IF;
    UPDATE send_waiters SET woken_until = p_now + make_interval(secs => p_reserve_ms / 1000.0)
    WHERE delivery_id = (SELECT s.delivery_id FROM send_waiters s WHERE s.delivery_id = next_id FOR UPDATE SKIP LOCKED)
      AND (woken_until IS NULL OR woken_until < p_now);
    IF FOUND THEN
      RETURN ARRAY[next_id];
    END IF;
    passed := passed || next_id;
  END LOOP;
  RETURN '{}';
END $$;
--> statement-breakpoint

CREATE OR REPLACE FUNCTION release_send_places(p_delivery text, p_attempt text, p_reserve_ms integer, p_keep_ms integer DEFAULT NULL) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  now_at timestamptz := statement_timestamp();
  freed integer;
  hook record;
  line_open boolean;
  woken text[];
BEGIN
  IF p_keep_ms IS NOT NULL THEN
    UPDATE send_places SET attempt = NULL, not_before = now_at + make_interval(secs => p_keep_ms / 1000.0),
      expires_at = now_at + make_interval(secs => (p_keep_ms + p_reserve_ms) / 1000.0)
    WHERE (scope, slot) IN (
      SELECT p.scope, p.slot FROM send_places p WHERE p.delivery_id = p_delivery AND p.attempt = p_attempt FOR UPDATE SKIP LOCKED);
    IF FOUND THEN
      RETURN '{}';
    END IF;
  END IF;
  WITH given_back AS (
    UPDATE send_places SET delivery_id = NULL, attempt = NULL, expires_at = '-infinity', not_before = NULL
    WHERE (scope, slot) IN (
      SELECT p.scope, p.slot FROM send_places p
      WHERE p.delivery_id = p_delivery AND p.attempt IS NOT DISTINCT FROM p_attempt FOR UPDATE SKIP LOCKED)
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
