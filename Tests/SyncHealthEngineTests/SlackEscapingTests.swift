import Testing

@testable import SyncHealthEngine

@Suite("Slack's mrkdwn escaping")
struct SlackEscapingTests {
    @Test("& < > are escaped and nothing else, over scalars")
    func escaping() {
        #expect(SlackFormat.escaped("a<b>&c") == "a&lt;b&gt;&amp;c")
        #expect(SlackFormat.escaped("plain *text* é") == "plain *text* é")
        #expect(SlackFormat.escaped("<\u{301}") == "&lt;\u{301}", "a combining mark does not hide the bracket")
        #expect(SlackFormat.escaped("<!channel>") == "&lt;!channel&gt;")
    }
}
