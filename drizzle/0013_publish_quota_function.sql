-- The publish quota of a project (src/events/quota.ts): `p_rate` events per second with bursts of
-- `p_burst` (the operator's project_limits override both), by the generic cell rate algorithm on
-- one row per project. An event is accepted when the project's next arrival time is at most the
-- burst's tolerance ahead of now, and moves it on by 1 / rate; otherwise it is refused, and
-- `retry_after_ms` says when one would be accepted. One round trip; only the project's own
-- requests ever wait on its row.
CREATE FUNCTION take_publish_token(p_project text, p_rate double precision, p_burst integer)
RETURNS TABLE (granted boolean, retry_after_ms integer)
LANGUAGE plpgsql AS $$
DECLARE
  now_at timestamptz := statement_timestamp();
  rate double precision;
  burst integer;
  step interval;
  tolerance interval;
  next_at_now timestamptz;
BEGIN
  SELECT coalesce(l.publish_rate, p_rate), coalesce(l.publish_burst, p_burst) INTO rate, burst
  FROM (SELECT 1) AS one LEFT JOIN project_limits l ON l.project_id = p_project;
  step := make_interval(secs => 1.0 / rate);
  tolerance := make_interval(secs => (burst - 1) / rate);
  INSERT INTO publish_quotas AS q (project_id, next_at) VALUES (p_project, now_at + step)
  ON CONFLICT (project_id) DO UPDATE SET next_at = greatest(q.next_at, now_at) + step
  WHERE greatest(q.next_at, now_at) - now_at <= tolerance;
  IF FOUND THEN
    RETURN QUERY SELECT true, 0;
    RETURN;
  END IF;
  SELECT q.next_at INTO next_at_now FROM publish_quotas q WHERE q.project_id = p_project;
  RETURN QUERY SELECT false, greatest(1, ceil(extract(epoch FROM next_at_now - tolerance - now_at) * 1000))::integer;
END $$;
