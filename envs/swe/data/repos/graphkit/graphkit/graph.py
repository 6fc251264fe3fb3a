"""Adjacency-list graphs and the classic searches over them."""

import heapq
from collections import deque


class NoPathError(LookupError):
    pass


class CycleError(ValueError):
    pass


class Graph:
    def __init__(self, directed=True):
        self.directed = directed
        self.adj = {}

    def add_node(self, node):
        self.adj.setdefault(node, {})

    def add_edge(self, a, b, weight=1):
        if weight < 0:
            raise ValueError("negative weights are not supported")
        self.add_node(a)
        self.add_node(b)
        self.adj[a][b] = weight
        if not self.directed:
            self.adj[b][a] = weight

    def nodes(self):
        return list(self.adj)

    def neighbors(self, node):
        return sorted(self.adj[node])

    def edge_count(self):
        total = sum(len(n) for n in self.adj.values())
        return total if self.directed else total // 2

    def bfs(self, start):
        """Nodes in breadth-first order (neighbors visited in sorted order)."""
        seen = {start}
        order = []
        queue = deque([start])
        while queue:
            node = queue.popleft()
            order.append(node)
            for nxt in self.neighbors(node):
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        return order

    def hops(self, start, goal):
        """Fewest edges from start to goal."""
        dist = {start: 0}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            if node == goal:
                return dist[node]
            for nxt in self.neighbors(node):
                if nxt not in dist:
                    dist[nxt] = dist[node] + 1
                    queue.append(nxt)
        raise NoPathError(f"no path from {start!r} to {goal!r}")

    def shortest_path(self, start, goal):
        """Dijkstra: (total weight, list of nodes)."""
        best = {start: 0}
        previous = {}
        heap = [(0, start)]
        done = set()
        while heap:
            cost, node = heapq.heappop(heap)
            if node in done:
                continue
            done.add(node)
            if node == goal:
                path = [goal]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return cost, path[::-1]
            for nxt, weight in self.adj[node].items():
                new_cost = cost + weight
                if nxt not in best or new_cost < best[nxt]:
                    best[nxt] = new_cost
                    previous[nxt] = node
                    heapq.heappush(heap, (new_cost, nxt))
        raise NoPathError(f"no path from {start!r} to {goal!r}")

    def topological_sort(self):
        """Kahn's algorithm; ties broken by sorted node order."""
        if not self.directed:
            raise ValueError("topological order needs a directed graph")
        indegree = {n: 0 for n in self.adj}
        for node in self.adj:
            for nxt in self.adj[node]:
                indegree[nxt] += 1
        ready = sorted(n for n, d in indegree.items() if d == 0)
        order = []
        while ready:
            node = ready.pop(0)
            order.append(node)
            for nxt in self.neighbors(node):
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    ready.append(nxt)
                    ready.sort()
        if len(order) != len(self.adj):
            raise CycleError("the graph has a cycle")
        return order

    def has_cycle(self):
        try:
            self.topological_sort()
        except CycleError:
            return True
        return False

    def components(self):
        """Connected components of the undirected version, each sorted, largest first."""
        undirected = {n: set(self.adj[n]) for n in self.adj}
        for node, targets in self.adj.items():
            for t in targets:
                undirected[t].add(node)
        seen = set()
        out = []
        for node in sorted(undirected):
            if node in seen:
                continue
            stack = [node]
            comp = []
            seen.add(node)
            while stack:
                cur = stack.pop()
                comp.append(cur)
                for nxt in undirected[cur]:
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            out.append(sorted(comp))
        out.sort(key=lambda c: (-len(c), c))
        return out
