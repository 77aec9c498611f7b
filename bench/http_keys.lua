-- wrk script for bench/http_bench.py --client wrk: each request asks `asof` (a random
-- day) or `history` of a random parcel. Set by environment: FL_N parcels (P00000001..),
-- FL_DAYS days from 2026-08-01, FL_KIND asof|history|mix.
local n = tonumber(os.getenv("FL_N") or "100000")
local days = tonumber(os.getenv("FL_DAYS") or "3")
local kind = os.getenv("FL_KIND") or "mix"
local i = 0

function setup(thread)
  thread:set("seed", math.random(1, 1000000))
end

function init(args)
  math.randomseed(seed or 1)
end

request = function()
  i = i + 1
  local key = string.format("P%08d", math.random(1, n))
  local base = "/api/sources/parcels/entities/" .. key
  if kind == "history" or (kind == "mix" and i % 2 == 0) then
    return wrk.format("GET", base .. "/history")
  end
  return wrk.format("GET", string.format("%s/asof?valid=2026-08-%02d", base, math.random(1, days)))
end
