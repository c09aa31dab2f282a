ALTER TABLE "project_limits" ADD COLUMN "recovery_rate" double precision;--> statement-breakpoint
ALTER TABLE "project_limits" ADD CONSTRAINT "project_limits_recovery_rate_check" CHECK ("project_limits"."recovery_rate" is null or "project_limits"."recovery_rate" = 0 or ("project_limits"."recovery_rate" >= 0.1 and "project_limits"."recovery_rate" <= 1000));
--> statement-breakpoint

-- A project's own recovery pace, and three mends of acquire_send_places.
--
-- The operator may set a project's recovery rate (`limits set --recovery-rate`), over
-- PROJECT_RECOVERY_RATE, as they set its publish quota: a project whose quota was raised to
-- publish a hundred events a second would otherwise recover from an hour's outage at three.
-- It is read only for a send of an endpoint's backlog. 0 leaves that project's recovery
-- unpaced, and so does a rate of 0 passed by a caller (it divided by zero before).
--
-- The places a delivery already holds are locked first, in send_place_order, before anything
-- is changed: its lapsed hold was given up by an UPDATE that locked its rows in
-- whatever order the scan met them, while a late give-back of its previous attempt locks them
-- webhook, project, destination; each could wait for the other.
--
-- A send that waits while the breaker is open is said to wait for its probe only when the probe
-- interval gave the longer step; under a slower rate limit it waits for the rate.

CREATE OR REPLACE FUNCTION acquire_send_places(
  p_delivery text, p_attempt text,
  p_webhook_max integer, p_project_max integer, p_destination_max integer,
  p_hold_ms integer, p_reserve_ms integer, p_new_round boolean, p_recovery_rate double precision, p_probe_ms integer)
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
  recovery_start timestamptz;
  recovery_rate double precision;
  step_s double precision;
  held_scopes text[];
BEGIN
  SELECT w.id, w.project_id, w.destination, w.status, w.rate_limit, w.circuit_opened_at, w.circuit_closed_at, d.created_at INTO hook
  FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
  WHERE d.id = p_delivery;
  IF NOT FOUND OR hook.status <> 'active' THEN
    RETURN QUERY SELECT 'granted'::text, 0, NULL::text, 0, '{}'::text[];
    RETURN;
  END IF;

  -- What it holds is locked first, in the order every call locks places, so that a late
  -- give-back of its previous attempt and this call never wait for each other.
  PERFORM 1 FROM send_places p WHERE p.delivery_id = p_delivery
  ORDER BY send_place_order(p.scope), p.scope, p.slot FOR UPDATE;
  IF FOUND THEN
    SELECT p.attempt, p.expires_at, p.not_before INTO held FROM send_places p WHERE p.delivery_id = p_delivery LIMIT 1;
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

  scopes := ARRAY['w:' || hook.id, 'p:' || hook.project_id, 'd:' || hook.destination];
  IF holding THEN
    -- A new round (a manual retry) does not wait out the backoff its places were kept for; a
    -- start time under a rate limit stands.
    start_at := CASE WHEN p_new_round AND hook.rate_limit IS NULL THEN now_at ELSE held.not_before END;
    SELECT array_agg(p.scope) INTO held_scopes FROM send_places p WHERE p.delivery_id = p_delivery;
    IF coalesce(start_at <= now_at, true) AND NOT (scopes[2] = ANY (held_scopes) AND scopes[3] = ANY (held_scopes)) THEN
      -- Its rate-limited start has come, and it kept only its webhook's place until then: it
      -- takes its project's and its destination's now, or waits in line for them, keeping the
      -- webhook's place its start was given with.
      limits := send_scope_limits(hook.circuit_opened_at IS NOT NULL, hook.project_id, hook.destination, p_webhook_max, p_project_max, p_destination_max);
      SELECT * INTO me FROM send_waiters WHERE delivery_id = p_delivery;
      slots := ARRAY[NULL, NULL, NULL]::integer[];
      FOR i IN 2..3 LOOP
        CONTINUE WHEN scopes[i] = ANY (held_scopes);
        free_slot := take_free_send_place(scopes[i], limits[i], now_at);
        IF free_slot IS NULL THEN
          full_level := i;
          EXIT;
        END IF;
        slots[i] := free_slot;
      END LOOP;
      IF full_level IS NULL THEN
        UPDATE send_places SET delivery_id = p_delivery, attempt = NULL, not_before = NULL, taken_at = now_at,
          expires_at = now_at + make_interval(secs => p_hold_ms / 1000.0)
        WHERE (scope, slot) IN ((scopes[2], slots[2]), (scopes[3], slots[3]));
        DELETE FROM send_waiters WHERE delivery_id = p_delivery;
      ELSE
        -- What it holds stays its own while it waits in line, as long as it asks again (the
        -- longest recheck of a line is 15 minutes); it lapses if its workflow is gone.
        UPDATE send_places SET expires_at = greatest(expires_at, now_at + interval '16 minutes') WHERE delivery_id = p_delivery;
      END IF;
    END IF;
  ELSE
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

  IF NOT holding THEN
    UPDATE send_places SET delivery_id = p_delivery, attempt = NULL, not_before = NULL, taken_at = now_at,
      expires_at = now_at + make_interval(secs => p_hold_ms / 1000.0)
    WHERE (scope, slot) IN ((scopes[1], slots[1]), (scopes[2], slots[2]), (scopes[3], slots[3]));
    DELETE FROM send_waiters WHERE delivery_id = p_delivery;
  END IF;

  -- The rate limit: each send is given its own start time, 1 / rate_limit seconds after the
  -- previous one's, and keeps its webhook's place reserved until then, so waiters wake one at a
  -- time. (A holding send's start was read above.) While the breaker is open the endpoint's
  -- probes are spaced the same way, p_probe_ms apart at least: one at a time is not enough for an
  -- endpoint that fails at once, which one attempt after another would hit as fast as they go.
  IF NOT holding THEN
    step_s := CASE
      WHEN hook.circuit_opened_at IS NOT NULL AND p_probe_ms > 0 THEN greatest(p_probe_ms / 1000.0, coalesce(1.0 / hook.rate_limit, 0))
      ELSE 1.0 / hook.rate_limit END;
  END IF;
  IF step_s IS NOT NULL THEN
    UPDATE webhooks SET rate_next_at = greatest(now_at, coalesce(rate_next_at, now_at)) + make_interval(secs => step_s)
    WHERE id = hook.id
    RETURNING rate_next_at - make_interval(secs => step_s) INTO start_at;
  END IF;
  -- A delivery made before its webhook's breaker last closed is of the endpoint's backlog: it
  -- takes the next start of its project's recovery schedule, 1 / its recovery rate after the
  -- previous one (the project's own rate, or p_recovery_rate; 0 or none: not paced), and keeps
  -- its webhook's place until then like a rate-limited send.
  IF NOT holding AND hook.circuit_opened_at IS NULL AND hook.created_at < hook.circuit_closed_at THEN
    recovery_rate := coalesce((SELECT l.recovery_rate FROM project_limits l WHERE l.project_id = hook.project_id), p_recovery_rate);
    IF recovery_rate > 0 THEN
      INSERT INTO recovery_schedules AS r (project_id, next_at)
      VALUES (hook.project_id, now_at + make_interval(secs => 1.0 / recovery_rate))
      ON CONFLICT (project_id) DO UPDATE SET next_at = greatest(now_at, r.next_at) + make_interval(secs => 1.0 / recovery_rate)
      RETURNING r.next_at - make_interval(secs => 1.0 / recovery_rate) INTO recovery_start;
      start_at := greatest(start_at, recovery_start);
    END IF;
  END IF;
  IF start_at > now_at THEN
    UPDATE send_places SET attempt = NULL, not_before = start_at,
      expires_at = start_at + make_interval(secs => p_reserve_ms / 1000.0)
    WHERE delivery_id = p_delivery;
    IF step_s IS NOT NULL OR recovery_start IS NOT NULL THEN
      -- Until its start it keeps its webhook's place only (which bounds how far ahead starts are
      -- given): its project's and its destination's go back at once to whoever waits for them,
      -- rather than stand idle while other customers' sends to the same host wait.
      WITH given_back AS (
        UPDATE send_places SET delivery_id = NULL, attempt = NULL, expires_at = '-infinity', not_before = NULL
        WHERE delivery_id = p_delivery AND scope <> scopes[1]
        RETURNING 1
      )
      SELECT count(*) INTO counted FROM given_back;
      IF counted > 0 THEN
        woken := woken || wake_send_waiters(NULL, hook.project_id, hook.destination, p_reserve_ms, now_at);
      END IF;
    END IF;
    RETURN QUERY SELECT 'wait_until'::text,
      least(ceil(extract(epoch FROM start_at - now_at) * 1000), 2147483647)::integer,
      CASE WHEN start_at = recovery_start THEN 'recovery'
        WHEN hook.circuit_opened_at IS NOT NULL AND p_probe_ms > 0 AND p_probe_ms / 1000.0 >= coalesce(1.0 / hook.rate_limit, 0) THEN 'probe'
        ELSE 'rate' END, 0, woken;
    RETURN;
  END IF;
  UPDATE send_places SET attempt = p_attempt, not_before = NULL,
    expires_at = now_at + make_interval(secs => p_hold_ms / 1000.0)
  WHERE delivery_id = p_delivery;
  RETURN QUERY SELECT 'granted'::text, 0, NULL::text, 0, woken;
END $$;
