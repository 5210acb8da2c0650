-- GET with a key (path from the command line).
local key = os.getenv("WRK_KEY") or "bench-read-0123456789abcdefghijklmnop"
request = function() return wrk.format("GET", nil, {["Authorization"] = "Bearer " .. key}) end
