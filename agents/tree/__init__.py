"""The tree searches: PUCT guided by a network (:mod:`agents.tree.puct`, with the Gumbel root of
:mod:`agents.tree.gumbel_root`; its choices and defaults in :mod:`agents.tree.choices`), the sessions that batch its
leaves for any framework's network (:mod:`agents.tree.sessions`: the protocol in :mod:`agents.tree.session_base`,
self-play in :mod:`agents.tree.selfplay`, matches in :mod:`agents.tree.arena`), the sample datasets they write, and
UCT with tactical playouts (:mod:`agents.tree.uct`). Nothing here imports a network library: the network is the
caller's."""
