-- GET with a key (path from the command line).
local key = os.getenv("WRK_KEY") or "bench-read"
request = function() return wrk.format("GET", nil, {["Authorization"] = "Bearer " .. key}) end
