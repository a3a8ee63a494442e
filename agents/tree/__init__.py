"""The tree searches: PUCT guided by a network (:mod:`agents.tree.puct`, with the Gumbel root of
:mod:`agents.tree.gumbel_root`), the sessions that batch its leaves for any framework's network, the sample
datasets they write, and UCT with random playouts (:mod:`agents.tree.uct`). Nothing here imports a network
library: the network is the caller's."""
