"""Transactions without a broker: the coordinator log and how transactions
ended, producer ids, consumer-group offsets, finishing and fencing, and one
transaction written by many processes. Everything here reads the log through
:class:`arrowlog.txn.view.LogView`."""
