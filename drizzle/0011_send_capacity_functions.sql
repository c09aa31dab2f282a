-- Send capacity (src/flow-control/places.ts): a send starts only while its delivery holds one
-- place of its webhook (ENDPOINT_MAX_IN_FLIGHT, or one while the circuit breaker is open), one of
-- its project (PROJECT_MAX_IN_FLIGHT, or the operator's project_limits) and one of its
-- destination, the URL's host:port (DESTINATION_MAX_IN_FLIGHT, or destination_limits). A place
-- is a row of send_places; a request takes a free row of each scope with FOR UPDATE SKIP LOCKED,
-- so requests never queue on one another's locks and no row is a count everyone must update.
-- A delivery that finds a scope full waits in send_waiters, and its workflow for the sendTurn
-- signal; giving places back wakes the next in line of each scope that got a place back. One
-- call is one round trip, and its cost does not grow with the number of deliveries waiting.
-- Times are the database's, so every replica reads the same clock.

-- A free place of a scope (made on first use, up to its limit), locked for the caller; null when
-- the scope is full. A place is free once its `expires_at` has passed (-infinity when given
-- back), so the free places of a scope are one range of send_places_free_idx.
CREATE FUNCTION take_free_send_place(p_scope text, p_limit integer, p_now timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  found_slot integer;
  made integer;
BEGIN
  SELECT slot INTO found_slot FROM send_places
  WHERE scope = p_scope AND expires_at < p_now AND slot <= p_limit
  ORDER BY expires_at LIMIT 1 FOR UPDATE SKIP LOCKED;
  IF FOUND THEN
    RETURN found_slot;
  END IF;
  SELECT coalesce(max(slot), 0) INTO made FROM send_places WHERE scope = p_scope;
  IF made < p_limit THEN
    INSERT INTO send_places (scope, slot) SELECT p_scope, n FROM generate_series(made + 1, p_limit) AS n ON CONFLICT DO NOTHING;
    SELECT slot INTO found_slot FROM send_places
    WHERE scope = p_scope AND expires_at < p_now AND slot <= p_limit
    ORDER BY expires_at LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
      RETURN found_slot;
    END IF;
  END IF;
  -- Each free place is locked by another request deciding at this instant (most give it back at
  -- once, lacking a place elsewhere): wait for the first, a statement's time, and recheck it,
  -- rather than queue while places are free.
  SELECT slot INTO found_slot FROM send_places
  WHERE scope = p_scope AND expires_at < p_now AND slot <= p_limit
  ORDER BY expires_at LIMIT 1 FOR UPDATE;
  RETURN found_slot;
END $$;
--> statement-breakpoint

-- Wakes the one delivery that gets the places just given back at a webhook, its project and its
-- destination (a scope given a null got none back), marks it woken and returns it (its workflow
-- is then signalled): of the next of the webhook's line (its oldest waiter, which can use all
-- three places) and the webhook heads waiting longest at the project's and the destination's
-- places, the one that has waited at its level the longest. So the webhooks sharing a project
-- or a destination take turns, one wake a release. A waiter woken earlier and not back within
-- its time is woken again.
CREATE FUNCTION wake_send_waiters(p_webhook text, p_project text, p_destination text, p_reserve_ms integer, p_now timestamptz) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  next_id text;
BEGIN
  -- Tried again when a release at this instant woke the same delivery (each statement sees it
  -- once that release has committed), so each release wakes one of its own.
  FOR try IN 1..3 LOOP
    SELECT candidate.delivery_id INTO next_id FROM (
      (SELECT delivery_id, blocked_since FROM send_waiters
       WHERE p_webhook IS NOT NULL AND webhook_id = p_webhook AND (woken_until IS NULL OR woken_until < p_now)
       ORDER BY seq LIMIT 1)
      UNION ALL
      (SELECT delivery_id, blocked_since FROM send_waiters
       WHERE p_project IS NOT NULL AND project_id = p_project AND blocked = 'project' AND (woken_until IS NULL OR woken_until < p_now)
       ORDER BY blocked_since LIMIT 1)
      UNION ALL
      (SELECT delivery_id, blocked_since FROM send_waiters
       WHERE p_destination IS NOT NULL AND destination = p_destination AND blocked = 'destination' AND (woken_until IS NULL OR woken_until < p_now)
       ORDER BY blocked_since LIMIT 1)
    ) AS candidate
    ORDER BY candidate.blocked_since LIMIT 1;
    IF next_id IS NULL THEN
      RETURN '{}';
    END IF;
    UPDATE send_waiters SET woken_until = p_now + make_interval(secs => p_reserve_ms / 1000.0)
    WHERE delivery_id = next_id AND (woken_until IS NULL OR woken_until < p_now);
    IF FOUND THEN
      RETURN ARRAY[next_id];
    END IF;
  END LOOP;
  RETURN '{}';
END $$;
--> statement-breakpoint

-- Asks for the places of the next attempt of a delivery, for the attempt `p_attempt`. Answers:
--   granted     the attempt may send now; its places are held for `p_hold_ms`;
--   wait_turn   a scope is full (`wait_reason`: webhook, project or destination): the delivery
--               waits in line, `ahead` others before it there (counted up to the scope's
--               limit), and is woken when a place frees;
--   wait_until  wait `wait_ms`: its places are held but the webhook's rate limit gives it a later
--               start (`rate`, reserved for it; or its places were kept for it after a timeout,
--               until its backoff ends), or an earlier attempt of the delivery holds its
--               places and its request may still be running (`attempt`: its worker stopped
--               answering; this one waits until that hold lapses, so one request at most is in
--               flight);
-- and `wake`: other deliveries this call woke. A delivery that is gone, or whose webhook is
-- disabled, is granted without places: its attempt ends without sending.
CREATE FUNCTION acquire_send_places(
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
    limits := ARRAY[
      CASE WHEN hook.circuit_opened_at IS NULL THEN p_webhook_max ELSE 1 END,
      coalesce((SELECT l.max_in_flight FROM project_limits l WHERE l.project_id = hook.project_id), p_project_max),
      coalesce((SELECT l.max_in_flight FROM destination_limits l WHERE l.destination = hook.destination), p_destination_max)];
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

    UPDATE send_places SET delivery_id = p_delivery, attempt = NULL, not_before = NULL,
      expires_at = now_at + make_interval(secs => p_hold_ms / 1000.0)
    WHERE (scope, slot) IN ((scopes[1], slots[1]), (scopes[2], slots[2]), (scopes[3], slots[3]));
    DELETE FROM send_waiters WHERE delivery_id = p_delivery;
    -- The webhook was served: the next of its line waits from now, behind the webhook heads that
    -- already wait for the project's or destination's places (they take turns).
    UPDATE send_waiters SET blocked_since = now_at
    WHERE delivery_id = (SELECT o.delivery_id FROM send_waiters o WHERE o.webhook_id = hook.id ORDER BY o.seq LIMIT 1);
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

-- Gives back the places of a delivery's attempt `p_attempt` (it ended; null: places only
-- reserved for its next attempt), or the delivery's place in line (it no longer waits), and
-- wakes the next in line of the scopes that got a place back; returns the deliveries woken.
-- Places a later attempt of the delivery took, after this one's hold lapsed, are that attempt's
-- and stay held.
--
-- With `p_keep_ms` (an attempt that timed out, and will be tried again after that backoff) the
-- places are not given back: they stay the delivery's, reserved for its next attempt from then
-- on, and nobody is woken. The place was held for the whole time limit already; keeping it for
-- the backoff spares a wake-up, a turn in line and a second request for places per timeout,
-- which is what a hanging endpoint's waves of timeouts cost everyone else.
CREATE FUNCTION release_send_places(p_delivery text, p_attempt text, p_reserve_ms integer, p_keep_ms integer DEFAULT NULL) RETURNS text[]
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
