-- The publish quota follows the project's current limits: a next arrival time stored under a
-- slower rate (the operator's former limit, or a former PROJECT_PUBLISH_RATE) is brought back to
-- the most the current rate and burst can owe (a burst used up: the next event waits one step of
-- the new rate), so a raised quota applies from the project's next request instead of once the
-- old debt has run out. The update matches nothing while the limits are unchanged; the rest is
-- migration 0013's.
CREATE OR REPLACE FUNCTION take_publish_token(p_project text, p_rate double precision, p_burst integer)
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
  UPDATE publish_quotas SET next_at = now_at + tolerance + step
  WHERE project_id = p_project AND next_at > now_at + tolerance + step;
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
