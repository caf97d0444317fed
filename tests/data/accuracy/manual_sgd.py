"""A language model in the shape of pytorch/examples' word_language_model,
written for CUDA: an LSTM trained by hand (parameters updated with
p.data.add_, no optimizer, so every call is in step 0), the loss read
with item() at each batch and fed back (each update is scaled by it, and
the learning rate cut by the sum).  Its compare must exit 0 (a float read
from the device and passed on may differ in its last bits), and its curve
holds every read, in order."""
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda")
g = torch.Generator().manual_seed(0)
corpus = torch.randint(0, 20, (400,), generator=g)
data = corpus[: 400 // 4 * 4].view(4, -1).t().contiguous().to(device)


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.rnn = nn.LSTM(16, 16)
        self.head = nn.Linear(16, 20)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.embed(x), hidden)
        return self.head(out), hidden


model = LM().to(device)
criterion = nn.CrossEntropyLoss()
lr, best = 2.0, None
hidden = None
for epoch in range(2):
    total = 0.0
    for i in range(0, data.size(0) - 9, 8):
        x, y = data[i:i + 8], data[i + 1:i + 9]
        if hidden is not None:
            hidden = tuple(h.detach() for h in hidden)
        model.zero_grad()
        out, hidden = model(x, hidden)
        loss = criterion(out.view(-1, 20), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        read = loss.item()  # LOSS
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr * min(1.0, 3.0 / read))
        total += read
    if best is not None and total > best:
        lr /= 4.0
    best = total if best is None else min(best, total)
    print(f"epoch {epoch} total {total:.6f} lr {lr}")
