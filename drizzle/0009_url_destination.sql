-- The destination of a webhook URL, as its sends are counted (src/flow-control/): the host and
-- port as the customer wrote them, `host:port`, the host in lower case (an IPv6 literal keeps its
-- brackets) and the port 443 when none is written. Resolved addresses are not part of it
-- (docs/architecture.md, "Isolation"). IMMUTABLE: `webhooks.destination` is generated from it.
CREATE FUNCTION url_destination(url text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
  SELECT lower(parts[1]) || ':' || coalesce(nullif(parts[2], '')::integer, 443)::text
  FROM regexp_match(url, '^[A-Za-z][A-Za-z0-9+.-]*://(\[[^]/]*\]|[^/?#:]*)(?::([0-9]{1,5}))?') AS parts
$$;
