extension ErrorAdvice {
    /// Advice for every `CKError.Code`, by raw value.
    static let cloudKit: [Int: ErrorAdvice] = [
        1: .init(
            who: .none,
            text: """
                CloudKit failed internally; if many devices keep reporting it, report it to Apple with Feedback Assistant.
                """
        ),
        2: .init(who: .none, text: "Some items of a request failed; the device did not say which, and the sync engine retries the rest."),
        3: .init(who: .none, text: "The device is offline; sync resumes when the network returns."),
        4: .init(who: .none, text: "The network failed during a request; CloudKit retries on its own."),
        5: .init(
            who: .developer,
            text: """
                The container is unknown or not authorized for this app: check the container identifier in the app's iCloud \
                entitlement and that the container exists in the CloudKit Console.
                """
        ),
        6: .init(
            who: .none,
            text: """
                CloudKit is unavailable; requests resume after the retry delay. If every device reports it, check Apple's \
                System Status.
                """
        ),
        7: .init(
            who: .none,
            text: """
                CloudKit is rate-limiting this device; requests resume after the retry delay. If it lasts fleet-wide, the app \
                sends too many requests.
                """
        ),
        8: .init(
            who: .developer,
            text: """
                The app lacks the CloudKit entitlement: enable iCloud with CloudKit for the target and ship a build signed \
                with that provisioning profile.
                """
        ),
        9: .init(
            who: .user,
            text: """
                The user is not signed in to iCloud: they must sign in in Settings; the app should say why sync is off.
                """
        ),
        10: .init(
            who: .user,
            text: """
                The iCloud account may not read or write this data, for example a share it was removed from: the owner must \
                invite it again.
                """
        ),
        11: .init(
            who: .none,
            text: """
                A record no longer exists on the server and the sync engine drops or re-creates it; after a release, check \
                that every record type is deployed to the production schema.
                """
        ),
        12: .init(
            who: .developer,
            text: """
                CloudKit rejected the request's arguments, for example a field the schema lacks or a query on a field that is \
                not queryable: fix the request or the schema.
                """
        ),
        13: .init(who: .developer, text: "The results were truncated (a deprecated code): fetch in smaller pages."),
        14: .init(who: .none, text: "The server holds a newer version of a record; the sync engine merges the change and saves again."),
        15: .init(
            who: .developer,
            text: """
                The server rejected the request, most often a record type or field missing from the production schema: deploy \
                the schema in the CloudKit Console.
                """
        ),
        16: .init(
            who: .none,
            text: """
                An asset's file was missing when the record was saved; the sync engine retries, and the app must keep the file \
                until the save ends.
                """
        ),
        17: .init(who: .none, text: "An asset's file changed while it was uploaded; the sync engine uploads it again."),
        18: .init(
            who: .developer,
            text: """
                This app version is older than the oldest the container allows: ship an update and ask users to install it, or \
                lower the minimum version.
                """
        ),
        19: .init(
            who: .developer,
            text: """
                A save broke a unique constraint of the schema: the app must not create two records with the same unique \
                value.
                """
        ),
        20: .init(who: .none, text: "The operation was cancelled, by the app or the system; nothing to do unless it repeats."),
        21: .init(
            who: .none,
            text: """
                The change token expired; the sync engine fetches every change again, which takes longer but needs nobody.
                """
        ),
        22: .init(
            who: .none,
            text: """
                A batch failed as a whole because one of its items failed; the sync engine retries it, and the item's own \
                error tells the cause.
                """
        ),
        23: .init(who: .none, text: "The record zone is busy with other requests; CloudKit retries after the retry delay."),
        24: .init(
            who: .developer,
            text: """
                The operation is not allowed on this database, for example custom zones in the public database: fix the app's \
                code.
                """
        ),
        25: .init(who: .user, text: "The user's iCloud storage is full: they must free space or buy more storage; sync resumes then."),
        26: .init(
            who: .developer,
            text: """
                The record zone does not exist on the server: the app must create it again and upload its local data \
                (NSPersistentCloudKitContainer and CKSyncEngine do this themselves).
                """
        ),
        27: .init(
            who: .none,
            text: """
                A request was too large and the sync engine splits it; if it repeats, a single record is too big: move large \
                data into a CKAsset.
                """
        ),
        28: .init(
            who: .developer,
            text: """
                The user deleted this app's data in iCloud settings: the app must ask before it uploads local data again, and \
                reset its sync state.
                """
        ),
        29: .init(who: .user, text: "The share has more participants than CloudKit allows: the owner must remove some."),
        30: .init(
            who: .developer,
            text: """
                The record is already shared, or belongs to a shared hierarchy: the app must use the existing share.
                """
        ),
        31: .init(
            who: .developer,
            text: """
                A record references a parent or target that does not exist: save the target first, or fix the reference.
                """
        ),
        32: .init(
            who: .user,
            text: """
                The account is managed and its organization restricts CloudKit for this app: the organization must allow it.
                """
        ),
        33: .init(
            who: .user,
            text: """
                The user must verify their identity before accepting the share: they should open the share link again.
                """
        ),
        34: .init(who: .none, text: "The server's response was lost; CloudKit retries the request, which is safe to repeat."),
        35: .init(who: .none, text: "An asset cannot be reached right now; the sync engine fetches it again later."),
        36: .init(
            who: .none,
            text: """
                The iCloud account is signed in but not ready yet; sync resumes when it is, and if it lasts the user should \
                look in Settings for a request to confirm their password.
                """
        ),
    ]

    /// Advice for the Core Data codes an `NSPersistentCloudKitContainer` reports.
    ///
    /// 134400 is not in Core Data's public headers: it is the code `NSCloudKitMirroringDelegate` gives when the device
    /// has no iCloud account. The others are `CoreDataErrors.h` constants.
    static let coreData: [Int: ErrorAdvice] = [
        134_400: .init(
            who: .user,
            text: """
                The device has no iCloud account, so the store is not mirrored: the user must sign in to iCloud.
                """
        ),
        134_060: .init(
            who: .developer,
            text: """
                Core Data failed (NSCoreDataError); the message says why, often a model CloudKit cannot mirror: every \
                attribute optional or defaulted, no unique constraints.
                """
        ),
        134_110: .init(
            who: .developer,
            text: """
                The store's migration failed (NSMigrationError): ship a model version that migrates lightweight, or a mapping \
                model.
                """
        ),
        134_301: .init(
            who: .developer,
            text: """
                Persistent history was purged past a token still in use (NSPersistentHistoryTokenExpiredError): do not delete \
                history the CloudKit mirroring still needs.
                """
        ),
    ]
}
