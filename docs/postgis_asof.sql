-- "The layer as of a date", answered from the ledger itself when the ledger's store is
-- a PostgreSQL database with PostGIS (README.md, "PostGIS destination").
--
-- Install once into the ledger's schema (the store's search_path), then:
--
--   SELECT * FROM feedledger_layer_asof('parcels', '2026-08-01');            -- valid time
--   SELECT * FROM feedledger_layer_asof('parcels', '2026-08-01', 4326, '2026-08-03');
--                                            -- as the ledger knew it then (transaction time)
--   SELECT * FROM feedledger_layer_asof('parcels', '2026-08-01', tz => 'America/Denver');
--                                            -- a source whose `timezone` is not UTC
--
-- One row per feature present at that valid time: its key (the ledger's canonical key
-- text, a JSON array), its attributes (jsonb), its geometry (the version's geometry as
-- stated, with `srid`), the version's valid_from and id. The ledger's two rules, as
-- ledger/visibility.py writes them: "known at K" (recorded by K and not retracted by
-- K; no K: the latest belief) and "latest version per key" (the greatest
-- (valid_from, txn_seq) with valid_from <= the date); a key whose latest version then
-- is a deletion is absent.
--
-- Honest as `Source.layer()` and the OGC API are: a valid time the source was not
-- observed at is refused with an error, never answered with the state before it --
-- before the source's first payload, or inside one of its gaps (recorded by a run or
-- `feedledger gap add`, visible as known at `known_at`) on a day of the source's
-- `timezone` (`tz`, default UTC: give the source's own) on which no payload was
-- observed, as `ledger/gaps` subtracts them. `feedledger_layer_rows` (same arguments,
-- no `tz`) answers without that check: the last state recorded before the date.
--
-- Attribute texts are stored compact (ledger/encoding/codec.py): each token of the
-- version's codebook (`field_lists`) is replaced by its string -- a pattern i is the
-- control character chr(1 + i); a value segment j (codebooks with values) the
-- two characters chr(29 + j / 92) || the (j % 92)-th printable ASCII character other
-- than '"', ',' and '{'. `feedledger_decode` does exactly that, token by token.

CREATE OR REPLACE FUNCTION feedledger_decode(tokens jsonb, pattern text, stored text)
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    out text := stored;
    t text;
BEGIN
    IF stored IS NULL OR tokens IS NULL THEN
        RETURN stored;
    END IF;
    FOR t IN SELECT DISTINCT m[1] FROM regexp_matches(stored, pattern, 'g') AS m LOOP
        out := replace(out, t, coalesce(tokens ->> t, t));
    END LOOP;
    RETURN out;
END
$$;

CREATE OR REPLACE FUNCTION feedledger_layer_rows(
    source text, valid timestamptz, srid integer DEFAULT 4326, known_at timestamptz DEFAULT NULL
)
RETURNS TABLE (key text, attributes jsonb, geom geometry, valid_from timestamptz,
               version_id bigint)
LANGUAGE sql STABLE AS $$
WITH seconds AS (
    SELECT string_agg(chr(c), '' ORDER BY c) AS s
    FROM generate_series(32, 126) AS c WHERE chr(c) NOT IN ('"', ',', '{')
), books AS (
    SELECT f.fields_id,
        coalesce((SELECT jsonb_object_agg(chr(o::integer), p)
                  FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(b.j) = 'object'
                       THEN b.j -> 'patterns' ELSE b.j END) WITH ORDINALITY AS x(p, o)), '{}')
        || coalesce((SELECT jsonb_object_agg(
                        chr(29 + ((o - 1) / 92)::integer)
                        || substr(seconds.s, ((o - 1) % 92)::integer + 1, 1), v)
                     FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(b.j) = 'object'
                          THEN b.j -> 'values' ELSE '[]'::jsonb END) WITH ORDINALITY AS y(v, o)),
                    '{}') AS tokens,
        CASE WHEN jsonb_typeof(b.j) = 'object' AND jsonb_array_length(b.j -> 'values') > 0
             THEN '[\x1d-\x1f][ -~]|[\x01-\x1c]' ELSE '[\x01-\x1f]' END AS pattern
    FROM field_lists f, seconds, LATERAL (SELECT f.codebook::jsonb AS j) b
    WHERE f.source = feedledger_layer_rows.source
), latest AS (
    SELECT DISTINCT ON (v.key) v.key, v.deleted, v.attributes, v.fields_id, v.geometry,
           v.valid_from, v.version_id
    FROM versions v
    WHERE v.source = feedledger_layer_rows.source
      AND v.valid_from <= (extract(epoch FROM valid) * 1000000)::bigint
      AND CASE WHEN known_at IS NULL THEN v.retracted_at IS NULL
               ELSE v.recorded_at <= (extract(epoch FROM known_at) * 1000000)::bigint
                    AND (v.retracted_at IS NULL
                         OR v.retracted_at > (extract(epoch FROM known_at) * 1000000)::bigint)
          END
    ORDER BY v.key, v.valid_from DESC, v.txn_seq DESC
)
SELECT l.key,
       feedledger_decode(b.tokens, b.pattern, l.attributes)::jsonb,
       CASE WHEN l.geometry IS NULL OR l.geometry = 'null' THEN NULL
            ELSE ST_SetSRID(ST_GeomFromGeoJSON(l.geometry), srid) END,
       to_timestamp(l.valid_from / 1000000.0),
       l.version_id
FROM latest l LEFT JOIN books b ON b.fields_id = l.fields_id
WHERE NOT l.deleted
$$;

-- (an earlier install's four-argument function, which did not consult gaps, replaced)
DROP FUNCTION IF EXISTS feedledger_layer_asof(text, timestamptz, integer, timestamptz);

CREATE OR REPLACE FUNCTION feedledger_layer_asof(
    source text, valid timestamptz, srid integer DEFAULT 4326, known_at timestamptz DEFAULT NULL,
    tz text DEFAULT 'UTC'
)
RETURNS TABLE (key text, attributes jsonb, geom geometry, valid_from timestamptz,
               version_id bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v bigint := (extract(epoch FROM valid) * 1000000)::bigint;
    k bigint := (extract(epoch FROM known_at) * 1000000)::bigint;  -- NULL: the latest belief
    day date := (valid AT TIME ZONE tz)::date;
    gap record;
BEGIN
    -- the source's payloads standing as known at k (recorded by then, not retracted by then)
    IF NOT EXISTS (
        SELECT 1 FROM applications a
        WHERE a.source = feedledger_layer_asof.source AND a.published_at <= v
          AND CASE WHEN k IS NULL THEN a.retracted_at IS NULL
                   ELSE a.recorded_at <= k AND (a.retracted_at IS NULL OR a.retracted_at > k) END
    ) THEN
        RAISE EXCEPTION '%: % is before its first observation: the layer was not observed then',
            source, valid USING ERRCODE = 'no_data_found';
    END IF;
    SELECT g.start_at, g.end_at, g.reason INTO gap FROM gaps g
    WHERE g.source = feedledger_layer_asof.source AND g.start_at <= v AND v < g.end_at
      AND CASE WHEN k IS NULL THEN g.retracted_at IS NULL
               ELSE g.recorded_at <= k AND (g.retracted_at IS NULL OR g.retracted_at > k) END
      AND NOT EXISTS (  -- a day with a payload observed on it is no longer in the gap
        SELECT 1 FROM applications a
        WHERE a.source = feedledger_layer_asof.source
          AND (to_timestamp(a.published_at / 1000000.0) AT TIME ZONE tz)::date = day
          AND CASE WHEN k IS NULL THEN a.retracted_at IS NULL
                   ELSE a.recorded_at <= k AND (a.retracted_at IS NULL OR a.retracted_at > k) END
      )
    ORDER BY g.start_at LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%: % is inside a gap (% to %: %): the layer was not observed then',
            source, valid, to_timestamp(gap.start_at / 1000000.0),
            to_timestamp(gap.end_at / 1000000.0), gap.reason USING ERRCODE = 'no_data_found';
    END IF;
    RETURN QUERY SELECT * FROM feedledger_layer_rows(source, valid, srid, known_at);
END
$$;
