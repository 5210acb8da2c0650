-- POST /v1/events from a file of prepared requests, one line each: body, then optionally a TAB, the key id and
-- the assertion (App Attest), or a TAB, `token` and a device token. Thread N reads WRK_REQUESTS.N; its requests go
-- out in file order, each once: an assertion's counter is accepted once, so a thread that runs out starts again and
-- those repeats are refused
-- (the bench counts them as non-2xx and says so).
local key = os.getenv("WRK_KEY") or "bench-ingest-0123456789abcdefghijklmnop"
local base = os.getenv("WRK_REQUESTS")
local thread_id = 0
local lines, index = {}, 0

function setup(thread)
  thread:set("tid", thread_id)
  thread_id = thread_id + 1
end

function init(args)
  for line in io.lines(base .. "." .. tid) do
    local body, keyid, assertion = line:match("^([^\t]*)\t?([^\t]*)\t?([^\t]*)$")
    local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}
    if keyid == "token" then
      headers["SyncHealth-Device-Token"] = assertion
    elseif keyid ~= "" then
      headers["SyncHealth-Key-Id"] = keyid
      headers["SyncHealth-Assertion"] = assertion
    end
    lines[#lines + 1] = wrk.format("POST", "/v1/events", headers, body)
  end
end

request = function()
  index = index % #lines + 1
  return lines[index]
end
