"""Keeping a log small: compaction, retention and vacuum, and cleaning up the
bookkeeping transactions and groups leave behind. Works on any
:class:`arrowlog.txn.view.LogView`."""
